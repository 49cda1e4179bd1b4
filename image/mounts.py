"""`kael-mounts --config PATH --uid UID [--for daemon|mcp|doctor]`: the host paths an instance's
containers need, read from its config.

The config is read exactly as the engine reads it, so the host needs no Python: the run scripts
ask the image. One line per fact, tab-separated, for `image/lib.sh`:

    instance  NAME
    activation  tmux|systemd|pointer
    state     PATH        the state dir (created by the run script when missing)
    mount     PATH  rw|ro  OWNER  bind-mounted at the same path inside; must exist on the host
    optional  PATH  rw|ro  OWNER  mounted only when it exists on the host
    env       NAME=VALUE  set in the container

OWNER is who must own PATH for the run scripts to mount it (`image/lib.sh` refuses any other
owner, and a path that is or passes through a symlink): `user`, the Claude user (every path of
its own: project, state, Claude Code's config and workdir, tmux socket, pointer, user bus);
`root`, the system's (the system bus); `root-or-user`, the config file (the installer's is
root's, one written by hand may be the user's; every path it names is checked by its own kind).

Every path is absolute (the config guarantees it); `~` in the config expands with $HOME, which the
run scripts set to the Claude user's home.

`~/.claude.json` (Claude Code's global state, with the user-scope MCP servers, when the config
dir is the default `~/.claude`) lies outside every mounted directory. Claude Code replaces it by
rename (a temporary file, then rename(2)), and a bind mount of a single file keeps showing the
inode it was made with: a long-running container would see a copy frozen at its start. So only
doctor's one-off container (`--for doctor`, gone within seconds) mounts the file itself; the
daemon and the MCP server containers name it in $KAEL_UNMOUNTED instead, and doctor there says
that it cannot see it rather than that the registration is missing. Mounting the whole home
directory instead would show the container everything the Claude user keeps there.

The MCP server only reads what Claude Code wrote (it plans, reports and records requests in the
state dir): its container gets the project dir read-only and no pointer dir at all (the pointer
is the daemon's to write); that dir is named in $KAEL_UNMOUNTED too, so its doctor tool skips the
target rather than failing it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kael_thread_rebuild.config import Activation, Config, SystemdBus, load_config
from kael_thread_rebuild.doctor.facts import UNMOUNTED_ENV
from kael_thread_rebuild.doctor.mcp import global_state_files
from kael_thread_rebuild.errors import KaelError
from kael_thread_rebuild.state_layout import CONFIG_ENV

PURPOSES = ("daemon", "mcp", "doctor")
USER, ROOT, ROOT_OR_USER = "user", "root", "root-or-user"


def facts(config: Config, config_path: Path, uid: int,
          purpose: str = "daemon") -> list[tuple[str, ...]]:
    reads_only = purpose == "mcp"
    lines: list[tuple[str, ...]] = [
        ("instance", config.instance),
        ("activation", config.activation.value),
        ("state", str(config.state_dir)),
        ("mount", str(config.project_dir), "ro" if reads_only else "rw", USER),
        ("mount", str(config.state_dir), "rw", USER),
        ("mount", str(config_path), "ro", ROOT_OR_USER),
        ("env", f"{CONFIG_ENV}={config_path}"),  # every command in the container finds it
    ]
    # Read-only views of Claude Code's own state: the session registry (`sessions/`, which the
    # switch reads) and, for doctor, settings.json, .claude.json and the workdir's settings.
    # The container runs as the Claude user, who can read all of it anyway, with no network.
    # Without claude_config_dir doctor reads ~/.claude, Claude Code's default.
    config_dir = config.claude_config_dir or Path.home() / ".claude"
    lines.append(("mount" if config.claude_config_dir else "optional", str(config_dir), "ro", USER))
    beside = [str(path) for path in global_state_files(config_dir) if path.parent != config_dir]
    unmounted = []
    if purpose == "doctor":
        lines += [("optional", path, "ro", USER) for path in beside]
    else:
        unmounted += beside
    if config.claude_workdir is not None:
        lines.append(("mount", str(config.claude_workdir), "ro", USER))
    if config.activation is Activation.tmux:
        socket = config.tmux_socket
        if socket is not None and "/" in socket:
            lines.append(("mount", str(Path(socket).parent), "rw", USER))
        else:  # -L NAME or the default socket: tmux's own directory for the uid
            lines.append(("mount", f"/tmp/tmux-{uid}", "rw", USER))
    if config.resume_pointer_path is not None:
        if reads_only:
            unmounted.append(str(config.resume_pointer_path.parent))
        else:
            lines.append(("mount", str(config.resume_pointer_path.parent), "rw", USER))
    if config.activation is Activation.systemd:
        if config.systemd_bus is SystemdBus.system:
            lines.append(("mount", "/run/dbus", "rw", ROOT))
            lines.append(("optional", "/run/systemd/system", "ro", ROOT))
        else:
            lines.append(("mount", f"/run/user/{uid}", "rw", USER))
            lines.append(("env", f"XDG_RUNTIME_DIR=/run/user/{uid}"))
            lines.append(("env", f"DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/{uid}/bus"))
    if unmounted:
        lines.append(("env", f"{UNMOUNTED_ENV}={os.pathsep.join(unmounted)}"))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kael-mounts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", metavar="PATH", required=True)
    parser.add_argument("--uid", type=int, required=True,
                        help="the Claude user's uid (for tmux's default socket dir, user bus)")
    parser.add_argument("--for", dest="purpose", choices=PURPOSES, default="daemon",
                        help="the container's role: doctor's one-off container also mounts "
                             "~/.claude.json; the MCP server's gets the project dir read-only "
                             "and no pointer dir (default: daemon)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except KaelError as exc:
        print(f"kael-mounts: {exc}", file=sys.stderr)
        return 2
    for line in facts(config, Path(args.config).absolute(), args.uid, args.purpose):
        print("\t".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
