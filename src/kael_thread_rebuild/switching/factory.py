"""The switching base a config asks for."""

from __future__ import annotations

from typing import assert_never

from ..config import Activation, Config
from .base import SwitchBase
from .pointer import PointerBase
from .systemd import SystemdBase
from .tmux import TmuxBase


def make_base(config: Config) -> SwitchBase:
    if config.activation is Activation.tmux:
        return TmuxBase(config)
    if config.activation is Activation.pointer:
        return PointerBase(config)
    if config.activation is Activation.systemd:
        return SystemdBase(config)
    assert_never(config.activation)
