"""The build's one decision that pyproject.toml cannot state: the engine's hot modules (the
scanner, the classifier and its record table: `kael_thread_rebuild/compiled_modules.py`)
compiled by mypyc where that can be done, the same modules interpreted where it cannot (issue
26). Everything else is declared in pyproject.toml.

KAEL_COMPILE chooses: `1` compiles or fails the build, `0` builds a pure wheel, unset (the
default) compiles when mypy is importable and the C compiler (`CC`, as setuptools would call it)
builds an extension against this Python's headers, and builds a pure wheel otherwise, so that
`pip install` works without a compiler. mypy comes from [build-system] requires.
"""

from __future__ import annotations

import os
import runpy
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import Extension, setup

SWITCH = "KAEL_COMPILE"
# Declared in the package, where doctor reads them too (a standard-library-only module).
_DECLARED = runpy.run_path("src/kael_thread_rebuild/compiled_modules.py")
COMPILED = [_DECLARED["source_file"](name) for name in _DECLARED["COMPILED"]]
# Only these commands build binaries; metadata and sdists never need the compiler or mypy.
BUILD_COMMANDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}


def compiler_problem() -> str:
    """Why no extension can be built here ("" when one can): a one-line module compiled and
    linked the way build_ext does it."""
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.errors import CCompilerError, DistutilsError
    from setuptools._distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp, "probe.c")
        source.write_text("#include <Python.h>\nint kael_probe(void) { return 0; }\n")
        try:
            objects = compiler.compile([str(source)], output_dir=tmp,
                                       include_dirs=[sysconfig.get_paths()["include"]])
            compiler.link_shared_object(objects, str(Path(tmp, "probe.so")))
        except (CCompilerError, DistutilsError, OSError) as exc:
            return f"no C compiler with the Python headers ({exc})"
    return ""


def extensions() -> list[Extension]:
    """The compiled modules, or none (a pure wheel), as KAEL_COMPILE and this machine allow."""
    switch = os.environ.get(SWITCH, "")
    if switch not in ("", "0", "1"):
        sys.exit(f"setup.py: {SWITCH} must be 0, 1 or unset, not {switch!r}")
    if switch == "0" or not BUILD_COMMANDS & set(sys.argv[1:]):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        problem = f"mypy is not importable ({exc})"
    else:
        problem = compiler_problem()
    if problem:
        if switch == "1":
            sys.exit(f"setup.py: {SWITCH}=1 but {problem}")
        print(f"setup.py: building the interpreted engine only: {problem}", file=sys.stderr)
        return []
    # No config file: the project's (strict, with the pydantic plugin) is for `mypy src`; the
    # build environment holds only [build-system] requires: the types of other libraries the
    # compiled modules import (orjson) are taken as Any.
    return list(mypycify(["--config-file=", "--ignore-missing-imports", *COMPILED]))


setup(ext_modules=extensions())
