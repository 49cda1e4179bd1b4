"""The switching base a config asks for."""

from __future__ import annotations

from ..config import Activation, Config
from ..errors import Refused
from .base import SwitchBase
from .pointer import PointerBase
from .tmux import TmuxBase


def make_base(config: Config) -> SwitchBase:
    if config.activation is Activation.tmux:
        return TmuxBase(config)
    if config.activation is Activation.pointer:
        return PointerBase(config)
    raise Refused(f"activation {config.activation.value!r} is not available yet in this version; "
                  "use 'tmux' or 'pointer'")
