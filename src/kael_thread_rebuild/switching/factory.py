"""The switching base a config asks for (each imported only when asked: the Stop hook pays for
one base, not three)."""

from __future__ import annotations

from typing import assert_never

from ..config import Activation, Config
from .base import SwitchBase


def make_base(config: Config) -> SwitchBase:
    if config.activation is Activation.tmux:
        from .tmux import TmuxBase

        return TmuxBase(config)
    if config.activation is Activation.pointer:
        from .pointer import PointerBase

        return PointerBase(config)
    if config.activation is Activation.systemd:
        from .systemd import SystemdBase

        return SystemdBase(config)
    assert_never(config.activation)
