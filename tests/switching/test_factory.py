from __future__ import annotations

from pathlib import Path

from kael_thread_rebuild.switching.factory import make_base
from kael_thread_rebuild.switching.pointer import PointerBase
from kael_thread_rebuild.switching.tmux import TmuxBase
from tests.switching.sandbox import safe_config


def test_each_activation_gets_its_base(tmp_path: Path) -> None:
    assert isinstance(make_base(safe_config(tmp_path, activation="tmux")), TmuxBase)
    assert isinstance(make_base(safe_config(tmp_path, activation="pointer")), PointerBase)


