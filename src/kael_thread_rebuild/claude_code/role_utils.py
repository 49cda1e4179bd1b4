"""The installer's copy of this package's standard-library modules.

    python -m kael_thread_rebuild.claude_code.role_utils --write plugins/module_utils

writes `kael_claude_code/` into the collection's module_utils: the modules below byte for byte,
and an `__init__.py` that says so. Ansible ships them to the managed host (AnsiballZ follows their
relative imports), where no kael-thread-rebuild package is installed, so the installer and the
doctor run the same code. tests/installer/test_role_utils.py checks that the copies equal these
files; `--check` prints what is stale (exit 1) for scripts.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from ..fsutil import atomic_write_bytes

COMMAND = "python -m kael_thread_rebuild.claude_code.role_utils"
#: The package's name in the collection: modules import
#: `ansible_collections.kael.appliance.plugins.module_utils.kael_claude_code.<module>`.
PACKAGE = "kael_claude_code"
#: The modules the role runs: standard library only, Python 3.9+.
SHIPPED = ("command_line.py", "spellings.py", "start_command.py", "project_dir.py",
           "settings.py")
INIT = '''\
"""Copies of kael_thread_rebuild.claude_code's standard-library modules, written by `python -m
kael_thread_rebuild.claude_code.role_utils --write plugins/module_utils`; do not edit (the
installer tests check that they equal the package's files)."""
'''


def expected() -> dict[str, bytes]:
    """Each file of the collection's package, by name, as it must read."""
    here = resources.files(__package__)
    return {"__init__.py": INIT.encode(),
            **{name: here.joinpath(name).read_bytes() for name in SHIPPED}}


def stale(module_utils: Path) -> list[Path]:
    """The files of the collection's package under MODULE_UTILS that are missing or differ, and
    files there that are no copy."""
    folder = module_utils / PACKAGE
    wanted = expected()
    found = [folder / name for name, data in wanted.items()
             if not (folder / name).is_file() or (folder / name).read_bytes() != data]
    return found + sorted(p for p in folder.glob("*.py") if p.name not in wanted)


def write(module_utils: Path) -> list[Path]:
    """Write the collection's package under MODULE_UTILS (each file atomically); the files
    written."""
    folder = module_utils / PACKAGE
    folder.mkdir(mode=0o755, exist_ok=True)
    for extra in sorted(p for p in folder.glob("*.py") if p.name not in expected()):
        extra.unlink()
    changed = []
    for name, data in expected().items():
        path = folder / name
        if not path.is_file() or path.read_bytes() != data:
            atomic_write_bytes(path, data, mode=0o644)
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write or check the collection's copy of the "
                                                 "standard-library Claude Code modules.")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", metavar="MODULE_UTILS", type=Path,
                        help="the collection's module_utils folder (plugins/module_utils)")
    action.add_argument("--check", metavar="MODULE_UTILS", type=Path,
                        help="print the stale files and exit 1 when there are any")
    args = parser.parse_args(argv)
    if args.write is not None:
        for path in write(args.write):
            print(f"wrote {path}")
        return 0
    problems = stale(args.check)
    for path in problems:
        print(f"stale: {path} (regenerate: {COMMAND} --write {args.check})")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
