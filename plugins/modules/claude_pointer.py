#!/usr/bin/python
"""Put the running session's id into an empty pointer file (systemd base)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: claude_pointer
short_description: Put the running session's id into an empty pointer file
description:
  - The unit of a systemd household starts Claude Code on the session its pointer file names
    (examples/systemd/claude-start); an empty or missing pointer makes the next restart start
    another session, one that knows nothing of the conversation that runs. This writes the id of
    the session that runs into such a pointer, so that every later restart resumes it.
  - A pointer that names a session already is left as it is (the engine or the start script
    wrote it); one holding anything else too (the start script refuses to start on it, and says
    so in the journal).
  - Written atomically (a temporary file in the pointer's directory, flushed, renamed over it),
    keeping the file's mode (0600 for a new file). Run it as the Claude user (C(become_user));
    run as root, it refuses a path of which a component belongs to another user, and a pointer
    that is a symlink always fails with one line naming it.
options:
  path:
    description: The pointer file (the config's C(resume_pointer_path)).
    type: path
    required: true
  session_id:
    description: The session the unit's Claude Code runs (a UUID).
    type: str
    required: true
extends_documentation_fragment:
  - kael.appliance.module
"""

EXAMPLES = r"""
- name: Put the running session into the unit's empty pointer, as the Claude user
  become: true
  become_user: alice
  kael.appliance.claude_pointer:
    path: /home/alice/.local/state/claude-resume-pointer
    session_id: 0b0e7a52-4f0e-4a51-9d1c-3c8f0a6b2d11
  register: pointer
"""

RETURN = r"""
pointer:
  description: What the pointer names afterwards (empty when it was left unreadable or odd).
  returned: success
  type: str
written:
  description: Whether the session id was written (or would be, in check mode).
  returned: success
  type: bool
"""

import os
import re
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kael.appliance.plugins.module_utils.kael_user_files import (
    open_ours,
    root_refusal,
    symlink_refusal,
)

SESSION_ID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                        r"[0-9a-fA-F]{12}")
NEW_MODE = 0o600


def read_pointer(path: str) -> str | None:
    """The pointer's content, stripped; None when there is no such file."""
    try:
        with os.fdopen(open_ours(path, os.O_RDONLY), "rb") as handle:
            return handle.read(4096).decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return None


def write_pointer(path: str, session_id: str) -> None:
    """SESSION_ID and a newline, renamed over PATH (its mode kept)."""
    try:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
    except FileNotFoundError:
        mode = NEW_MODE
    directory = os.path.dirname(path)
    fd, temporary = tempfile.mkstemp(prefix=".pointer.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(f"{session_id}\n".encode())
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    folder = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def main() -> None:
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True},
                       "session_id": {"type": "str", "required": True}},
        supports_check_mode=True)
    path, session_id = module.params["path"], module.params["session_id"]
    if not SESSION_ID.fullmatch(session_id):
        module.fail_json(msg=f"{session_id!r} is not a session id")
    problem = root_refusal(path) or symlink_refusal(path, "the pointer file")
    if problem:
        module.fail_json(msg=problem)
    if not os.path.isdir(os.path.dirname(path)):
        module.fail_json(msg=f"the pointer's directory {os.path.dirname(path)} does not exist "
                             "(the unit's StateDirectory=, or pointer_path, names another?)")
    try:
        found = read_pointer(path)
    except OSError as exc:
        module.fail_json(msg=f"the pointer file {path} cannot be read: {exc}")
    if found:
        module.exit_json(changed=False, written=False,
                         pointer=found if SESSION_ID.fullmatch(found) else "")
    if not module.check_mode:
        try:
            write_pointer(path, session_id)
        except OSError as exc:
            module.fail_json(msg=f"the pointer file {path} cannot be written: {exc}")
    module.exit_json(changed=True, written=True, pointer=session_id)


if __name__ == "__main__":
    main()
