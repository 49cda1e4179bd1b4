"""Build the prompt hook's zipapp `kael-advisor-hook.pyz` from the installed kael_advisor package
(the advisor's Containerfile runs it with the image's Python; no second copy of the code).

    python hook-zipapp.py OUT.pyz

The hook runs on the host as `python3 -I OUT.pyz`, with the host's Python and nothing else: the
zipapp holds every module of the project that kael_advisor.hook imports, at any depth and inside
functions too (the log line's module is imported only on the error path), and the build fails
when the hook imports anything that is neither the project's nor the standard library's.
"""

from __future__ import annotations

import modulefinder
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ENTRY = "kael_advisor.hook"
OURS = ("kael_advisor", "kael_thread_rebuild")


def hook_modules() -> dict[str, Path]:
    """The project's modules the hook imports (name -> source file); exits on a foreign one."""
    finder = modulefinder.ModuleFinder()
    finder.import_hook(ENTRY)
    ours: dict[str, Path] = {}
    foreign = []
    installed = {Path(sysconfig.get_path(key)) for key in ("purelib", "platlib")}
    for name, module in finder.modules.items():
        file = getattr(module, "__file__", None)
        where = Path(file) if file else None
        if name.partition(".")[0] in OURS and where:
            ours[name] = where
        elif where and any(where.is_relative_to(folder) for folder in installed):
            foreign.append(name)
    # What no module provides (the standard library names other platforms' modules too): only
    # a missing module of the project's own stops the build.
    foreign += [name for name in finder.badmodules if name.partition(".")[0] in OURS]
    if foreign:
        sys.exit(f"hook-zipapp: {ENTRY} imports what the standard library lacks: "
                 f"{sorted(foreign)}")
    return ours


def main() -> None:
    out = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as stage:
        for name, source in sorted(hook_modules().items()):
            is_package = source.name == "__init__.py"
            target = Path(stage, *name.split("."), *(["__init__.py"] if is_package else []))
            if not is_package:
                target = target.with_suffix(".py")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            print(f"hook-zipapp: {name}")
        subprocess.run([sys.executable, "-m", "zipapp", stage, "-o", str(out), "-c",
                        "-p", "/usr/bin/env python3", "-m", f"{ENTRY}:main"], check=True)
    out.chmod(0o755)


if __name__ == "__main__":
    main()
