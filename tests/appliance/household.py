"""A pointer-base household on disk: project dir with a transcript, state dir, pointer file and
config, owned by the test's Claude user. Used by the fixtures and by benchmarks/bench_appliance.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kael_thread_rebuild.config import Config
from tests.builder import SESSION, TranscriptBuilder
from tests.drill import procs
from tests.guard import MARK, TEST_SOCKET_PREFIX


@dataclass
class Household:
    root: Path
    config: Config
    config_path: Path
    transcript: Path
    builder: TranscriptBuilder
    user: str
    original: bytes  # the transcript as written, which nothing may change

    @property
    def pointer(self) -> Path:
        assert self.config.resume_pointer_path is not None
        return self.config.resume_pointer_path


def make_household(root: Path, instance: str, uid: int, gid: int) -> Household:
    """Lay out a household under ROOT (an empty temp dir) for instance INSTANCE."""
    project = root / "projects" / "-home-user-project"
    state = root / "state"
    pointers = root / "pointer"
    for path in (project, state, pointers):
        path.mkdir(parents=True, mode=0o700)
    builder = TranscriptBuilder()
    builder.first_turn_attachments()
    builder.user("Please keep the number 4711 in mind.")
    builder.thinking()
    builder.tool_call("Bash", "x" * 4000, text="Checking the notes first.")
    builder.say("Noted: 4711.")
    builder.user("And what was it again?")
    builder.say("It was 4711.")
    builder.system()  # Claude Code's record of the turn's Stop hooks
    transcript = builder.write(project / f"{SESSION}.jsonl")
    (pointers / "session").write_text(f"{SESSION}\n")
    config_path = root / "kael.toml"
    config = procs.write_config(config_path, {
        "instance": instance, "project_dir": project, "state_dir": state,
        "activation": "pointer", "resume_pointer_path": pointers / "session",
        "tmux_target": f"{MARK}-unused:0.0", "tmux_socket": f"{TEST_SOCKET_PREFIX}{MARK}-unused",
        "health_window_seconds": 0.5, "poll_interval_seconds": 0.1,
    })
    config_path.chmod(0o644)
    for path in (project, state, pointers, transcript, pointers / "session"):
        os.chown(path, uid, gid)
    return Household(root, config, config_path, transcript, builder, f"{uid}:{gid}",
                     transcript.read_bytes())
