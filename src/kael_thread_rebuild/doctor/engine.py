"""The engine: whether the transcript scanner runs compiled (mypyc) or interpreted, and in an
editable install whether the compiled one is older than the scanner.py it was built from."""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path

from ..transcript import reader, scanner
from .facts import Facts
from .model import Check, passed, warned

DISTRIBUTION = "kael-thread-rebuild"
REBUILD = ("rebuild it: `.venv/bin/pip install -c constraints.txt -e '.[dev]'` in the checkout "
           "(or .ci/setup)")


def editable() -> bool:
    """Whether this package is installed editable (its modules are the checkout's own files)."""
    try:
        direct_url = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return False
    if not direct_url:
        return False
    return bool(json.loads(direct_url).get("dir_info", {}).get("editable", False))


def check_engine(facts: Facts) -> Check:
    """Compiled is what an install with a C compiler and the image run; interpreted is the same
    rules, not a fault (and as fast while plans parse every line whole, `reader.engine`)."""
    name = "engine"
    chosen = os.environ.get(reader.ENGINE_VARIABLE)
    if chosen and chosen not in reader.ENGINES:
        return warned(name, f"{reader.ENGINE_VARIABLE}={chosen!r} is not an engine "
                            f"({', '.join(reader.ENGINES)}) and is ignored: the "
                            f"{reader.engine()} engine runs",
                      f"set {reader.ENGINE_VARIABLE} to one of them, or unset it")
    module = Path(scanner.__file__)
    if not scanner.COMPILED:
        return passed(name, "the transcript scanner runs interpreted (this install has no "
                            "compiled one; plans parse every line whole, as fast today): to "
                            "compile it, reinstall with a C compiler and the Python headers "
                            "present")
    source = module.with_name("scanner.py")
    if editable() and source.exists() and source.stat().st_mtime > module.stat().st_mtime:
        return warned(name, f"the compiled scanner {module.name} is older than {source}: it "
                            "runs the rules as they were when it was built", REBUILD)
    how = "" if reader.engine() == "compiled" else (
        "; plans still parse every line whole, which is as fast today "
        f"({reader.ENGINE_VARIABLE}=compiled reads through the scanner)")
    return passed(name, f"the transcript scanner runs compiled ({module.name}){how}")
