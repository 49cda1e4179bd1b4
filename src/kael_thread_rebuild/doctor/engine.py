"""The engine: whether its hot modules (the transcript reader and scanner, the classifier and
its record table, the branch walk and the turns: `compiled_modules`) run compiled (mypyc) or
interpreted, and in an editable install whether a compiled one is older than the source it was
built from."""

from __future__ import annotations

import json
import os
from importlib import metadata

from .. import compiled_modules
from ..transcript import reader
from .facts import Facts
from .model import Check, passed, warned

DISTRIBUTION = "kael-thread-rebuild"
REBUILD = ("rebuild: `.venv/bin/pip install -c constraints.txt -e '.[dev]'` in the checkout "
           "(or .ci/setup)")
WHAT = "the transcript reader, the classifier and the branch walk"


def editable() -> bool:
    """Whether this package is installed editable (its modules are the checkout's own files)."""
    try:
        direct_url = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return False
    if not direct_url:
        return False
    return bool(json.loads(direct_url).get("dir_info", {}).get("editable", False))


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def check_engine(facts: Facts) -> Check:
    """Compiled is what an install with a C compiler and the image run; interpreted is the same
    rules, not a fault, only slower."""
    name = "engine"
    chosen = os.environ.get(reader.ENGINE_VARIABLE)
    if chosen and chosen not in reader.ENGINES:
        return warned(name, f"{reader.ENGINE_VARIABLE}={chosen!r} is not an engine "
                            f"({', '.join(reader.ENGINES)}) and is ignored: the "
                            f"{reader.engine()} engine runs",
                      f"set {reader.ENGINE_VARIABLE} to one of them, or unset it")
    modules = compiled_modules.modules()
    compiled = [module for module in modules if compiled_modules.is_compiled(module)]
    if not compiled:
        return passed(name, f"{WHAT} run interpreted (this install has no compiled modules; the "
                            "same rules, slower): to compile them, reinstall with a C compiler "
                            "and the Python headers present")
    if len(compiled) < len(modules):
        missing = ", ".join(_short(m.__name__) for m in modules if m not in compiled)
        return warned(name, f"{WHAT} run partly compiled: {missing} interpreted beside the "
                            "others compiled (an install mixed from two builds)", REBUILD)
    if editable():
        stale = [module for module in compiled if compiled_modules.older_than_source(module)]
        if stale:
            names = ", ".join(f"{_short(m.__name__)}.py" for m in stale)
            return warned(name, f"the compiled modules are older than {names}: the rules run "
                                "as they were when they were built", REBUILD)
    how = "" if reader.engine() == "compiled" else (
        "; plans parse every line whole "
        f"({reader.ENGINE_VARIABLE}=compiled reads long lines through the scanner)")
    return passed(name, f"{WHAT} run compiled ({len(compiled)} modules by mypyc){how}")
