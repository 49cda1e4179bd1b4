"""The modules setup.py compiles with mypyc where it can (issue 26): the reader with the mapping
it takes its lines from, the payload scanner, and the classifier with the record table it fills,
where a scan spends its time per line and per record; then the branch walk, the turns and their
token estimate, which take each record of the branch once the scan is done. The same files run
interpreted where no compiler was. setup.py reads COMPILED from this file (standard
library only); doctor's engine check asks which of them run compiled here."""

from __future__ import annotations

import importlib
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType

COMPILED = (
    "kael_thread_rebuild.transcript.scanner",
    "kael_thread_rebuild.transcript.mapped_file",
    "kael_thread_rebuild.transcript.reader",
    "kael_thread_rebuild.claude_code.record_shapes",
    "kael_thread_rebuild.conversation.arrays",
    "kael_thread_rebuild.conversation.branch",
    "kael_thread_rebuild.conversation.injected",
    "kael_thread_rebuild.conversation.interner",
    "kael_thread_rebuild.conversation.measured",
    "kael_thread_rebuild.conversation.records",
    "kael_thread_rebuild.conversation.table",
    "kael_thread_rebuild.conversation.tokens",
    "kael_thread_rebuild.conversation.turns",
)


def source_file(name: str) -> str:
    """Where module NAME's source is in the checkout (what setup.py hands mypyc)."""
    return "src/" + name.replace(".", "/") + ".py"


def is_compiled(module: ModuleType) -> bool:
    return str(module.__file__).endswith(tuple(EXTENSION_SUFFIXES))


def modules() -> list[ModuleType]:
    """The modules of COMPILED, as this process imports them."""
    return [importlib.import_module(name) for name in COMPILED]


def source_of(module: ModuleType) -> Path:
    """The source MODULE runs: its own file, or for a compiled one the .py it was built from,
    which every install keeps beside it (the compiled file itself is a stub that may stay the
    same when the source changes)."""
    path = Path(str(module.__file__))
    return path.with_name(path.name.split(".")[0] + ".py") if is_compiled(module) else path


def older_than_source(module: ModuleType) -> bool:
    """Whether MODULE runs compiled from a build older than the source beside it (an editable
    install whose source was edited since: the old rules run)."""
    if not is_compiled(module):
        return False
    source = source_of(module)
    built = Path(str(module.__file__))
    return source.exists() and source.stat().st_mtime > built.stat().st_mtime
