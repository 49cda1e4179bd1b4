"""The engine's functions stay small enough to hold at once: none over cyclomatic complexity 15
(radon's measure, as `radon cc -s src` prints it), closures included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from radon.complexity import cc_visit
from radon.visitors import Function

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_COMPLEXITY = 15


def _functions(blocks: list[Function]) -> Iterator[Function]:
    for block in blocks:
        if isinstance(block, Function):  # a class's methods come as functions of their own
            yield block
            yield from _functions(block.closures)


def over_limit(source: str, limit: int = MAX_COMPLEXITY) -> list[str]:
    """Each function, method or closure of SOURCE whose cyclomatic complexity is over LIMIT,
    as `name line N (complexity)`."""
    return [f"{block.fullname} line {block.lineno} ({block.complexity})"
            for block in _functions(cc_visit(source)) if block.complexity > limit]


def _branches(count: int, indent: str = "    ") -> str:
    return "".join(f"{indent}if x == {n}:\n{indent}    return {n}\n" for n in range(count))


@pytest.mark.parametrize("shape", ["function", "method", "closure"])
def test_the_gate_sees_a_function_one_branch_over(shape: str) -> None:
    """A function of 15 decisions (complexity 16) is caught wherever it sits; 14 pass."""
    if shape == "function":
        over, under = (f"def f(x):\n{_branches(n)}    return -1\n" for n in (15, 14))
    elif shape == "method":
        over, under = (f"class C:\n    def f(self, x):\n{_branches(n, ' ' * 8)}        return -1\n"
                       for n in (15, 14))
    else:
        over, under = (f"def outer():\n    def f(x):\n{_branches(n, ' ' * 8)}        return -1\n"
                       "    return f\n" for n in (15, 14))
    assert len(over_limit(over)) == 1 and "(16)" in over_limit(over)[0]
    assert over_limit(under) == []


def test_no_function_in_src_is_over_complexity_15() -> None:
    found = [f"{path.relative_to(SRC)}: {problem}"
             for path in sorted(SRC.rglob("*.py"))
             for problem in over_limit(path.read_text(encoding="utf-8"))]
    assert not found, ("functions over cyclomatic complexity "
                       f"{MAX_COMPLEXITY} (cut them into named steps):\n" + "\n".join(found))
