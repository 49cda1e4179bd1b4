"""claude_start_command and its module_utils: from every spelling of a live start command to a
resume command that keeps every flag word for word (the 0815 "deaf process" incident)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.claude_code import command_line, project_dir
from kael_thread_rebuild.claude_code.role_utils import PACKAGE, SHIPPED
from kael_thread_rebuild.config import parse_config
from kael_thread_rebuild.doctor import resume
from kael_thread_rebuild.doctor.facts import Facts
from kael_thread_rebuild.doctor.model import Check
from kael_thread_rebuild.state_layout import CONFIG_ENV
from tests.installer.conftest import (
    INCIDENT_FLAGS,
    PLUGINS,
    REAL_CLAUDE,
    REPO,
    VENV_BIN,
    RunModule,
    ansible_env,
    load_filters,
    load_module_utils,
)

cli = load_module_utils("kael_claude_code.start_command")
role_command_line = load_module_utils("kael_claude_code.command_line")
role_project_dir = load_module_utils("kael_claude_code.project_dir")
R = "{session_id}"
UUID = "5d6a9b1e-0000-4000-8000-00000000abcd"


def exec_start(argv: str, path: str | None = None, ex: bool = False) -> str:
    third = "flags=" if ex else "ignore_errors=no"
    return (f"ExecStart={{ path={path or argv.split(' ')[0]} ; argv[]={argv} ; {third} ; "
            "start_time=[Mon 2026-11-30 08:00:01 UTC] ; stop_time=[n/a] ; pid=4242 ; "
            "code=(null) ; status=0/0 }")


# (how, start command, expected resume command)
DERIVED: list[tuple[str, Any, list[str]]] = [
    # the seed's incident, as the household started it
    ("argv", ["claude", "--continue", *INCIDENT_FLAGS], ["claude", "--resume", R, *INCIDENT_FLAGS]),
    ("argv", ["claude", *INCIDENT_FLAGS], ["claude", "--resume", R, *INCIDENT_FLAGS]),
    ("argv", ["claude", *INCIDENT_FLAGS, "-c"], ["claude", *INCIDENT_FLAGS, "--resume", R]),
    ("argv", ["claude", "-r", UUID, "--model", "opus"],
     ["claude", "--resume", R, "--model", "opus"]),
    ("argv", ["claude", "--resume", "--verbose"], ["claude", "--resume", R, "--verbose"]),
    ("argv", ["claude", f"--resume={UUID}", "--verbose"], ["claude", "--resume", R, "--verbose"]),
    ("argv", ["claude", "--session-id", UUID, "--fork-session", "--verbose"],
     ["claude", "--resume", R, "--verbose"]),
    # /proc cmdlines: node, native with a path, a prompt left out
    ("argv", ["node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js", "-c", "--ide"],
     ["node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js", "--resume", R, "--ide"]),
    ("argv", ["/home/u/.local/bin/claude", "--verbose", "summarize the log", "--", "and more"],
     ["/home/u/.local/bin/claude", "--resume", R, "--verbose"]),
    # quoting: spaces and unicode stay one word
    ("argv", ["claude", "--append-system-prompt", "说 你好, world", "--model", "claude opus"],
     ["claude", "--resume", R, "--append-system-prompt", "说 你好, world", "--model",
      "claude opus"]),
    # prefixes kept
    ("argv", ["env", "ANTHROPIC_BASE_URL=http://127.0.0.1:9", "FOO=a b", "claude", "-c"],
     ["env", "ANTHROPIC_BASE_URL=http://127.0.0.1:9", "FOO=a b", "claude", "--resume", R]),
    ("argv", ["sudo", "-u", "claude", "claude", *INCIDENT_FLAGS],
     ["sudo", "-u", "claude", "claude", "--resume", R, *INCIDENT_FLAGS]),
    # wrappers, seen through and kept
    ("argv", ["/bin/bash", "-lc", "cd ~/companion && exec claude --continue " +
              shlex.join(INCIDENT_FLAGS)],
     ["/bin/bash", "-lc", "cd ~/companion && exec claude --resume " + R + " " +
      shlex.join(INCIDENT_FLAGS)]),
    ("argv", ["sh", "-c", "claude -c --append-system-prompt 'be brief, 简短'"],
     ["sh", "-c", "claude --resume " + R + " --append-system-prompt 'be brief, 简短'"]),
    ("argv", ["script", "-qfc", "claude --continue --channels a", "/dev/null"],
     ["script", "-qfc", "claude --resume " + R + " --channels a", "/dev/null"]),
    ("argv", ["script", "--quiet", "--command=claude --channels a", "/dev/null"],
     ["script", "--quiet", "--command=claude --resume " + R + " --channels a", "/dev/null"]),
    ("argv", ["su", "-", "kael", "-c", "FOO=1 claude -c --model opus"],
     ["su", "-", "kael", "-c", "FOO=1 claude --resume " + R + " --model opus"]),
    ("argv", ["script", "-qfc", "bash -lc 'claude -c --channels a'", "/dev/null"],
     ["script", "-qfc", "bash -lc 'claude --resume " + R + " --channels a'", "/dev/null"]),
    ("argv", ["bash", "-c", 'exec "$0" "$@"', "claude", "--channels", "a"],
     ["bash", "-c", 'exec "$0" "$@"', "claude", "--resume", R, "--channels", "a"]),
    # systemctl show -p ExecStart
    ("exec_start", exec_start("/usr/local/bin/claude " + " ".join(INCIDENT_FLAGS)),
     ["/usr/local/bin/claude", "--resume", R, *INCIDENT_FLAGS]),
    ("exec_start", exec_start("/usr/local/bin/claude --continue --channels a", ex=True),
     ["/usr/local/bin/claude", "--resume", R, "--channels", "a"]),
    ("exec_start", exec_start('/bin/bash -lc cd /srv/kael && exec claude --resume '
                              '"$(cat /srv/kael/pointer)" --channels server:companion'),
     ["/bin/bash", "-lc", "cd /srv/kael && exec claude --resume " + R +
      " --channels server:companion"]),
    ("unit_argv", ["/usr/bin/claude", "--resume", UUID, "--thinking-display", "summarized"],
     ["/usr/bin/claude", "--resume", R, "--thinking-display", "summarized"]),
    # `@path name …`: the unit runs path with argv[0] = name; the program kept is path
    ("unit_argv", ["@/usr/local/bin/claude", "claude", "--channels", "a"],
     ["/usr/local/bin/claude", "--resume", R, "--channels", "a"]),
    ("exec_start", exec_start("claude --channels a", path="/usr/local/bin/claude"),
     ["/usr/local/bin/claude", "--resume", R, "--channels", "a"]),
    ("unit_argv", ["-/usr/local/bin/claude", "--channels", "a"],
     ["/usr/local/bin/claude", "--resume", R, "--channels", "a"]),
    # tmux #{pane_start_command}: one word (run by the shell) or an argv, tmux-escaped
    ("tmux", '"claude --continue ' + " ".join(INCIDENT_FLAGS) + '"',
     ["claude", "--resume", R, *INCIDENT_FLAGS]),
    ("tmux", "claude --channels \"a b\" \"it's\" 'q\"q' ünï \"\\$HOME\" '' tab\\tx",
     ["claude", "--resume", R, "--channels", "a b", "it's", 'q"q', "ünï", "$HOME", "", "tab\tx"]),
    # after the engine's own respawn (`exec <shlex.join(argv)>`), the same resume command
    ("tmux", '"exec claude --resume ' + UUID + ' ' + " ".join(INCIDENT_FLAGS) + '"',
     ["claude", "--resume", R, *INCIDENT_FLAGS]),
    ("tmux", '"cd /srv/x && ANTHROPIC_MODEL=opus claude -c --channels a"',
     ["/bin/sh", "-c", "cd /srv/x && ANTHROPIC_MODEL=opus claude --resume " + R +
      " --channels a"]),
    ("shell", 'claude --append-system-prompt "$(cat /etc/prompt)" -c',
     ["/bin/sh", "-c", 'claude --append-system-prompt "$(cat /etc/prompt)" --resume ' + R]),
    # options take the words commander gives them (`claude --help`): the prompt after a
    # one-value option is left out, the words after a variadic one are its values
    ("argv", ["claude", "--continue", "--model", "opus", "fix the bug"],
     ["claude", "--resume", R, "--model", "opus"]),
    ("tmux", '"claude --continue --model opus \'fix the bug\'"',
     ["claude", "--resume", R, "--model", "opus"]),
    ("argv", ["claude", "--append-system-prompt", "be brief", "-d", "hooks", "hi", "--verbose"],
     ["claude", "--resume", R, "--append-system-prompt", "be brief", "-d", "hooks", "--verbose"]),
    ("argv", ["claude", "--model=opus", "fix", "--add-dir", "/a", "/b", "--effort", "high", "go"],
     ["claude", "--resume", R, "--model=opus", "--add-dir", "/a", "/b", "--effort", "high"]),
    ("argv", ["claude", "-dhooks", "--model", "--weird-model-name", "hi"],
     ["claude", "--resume", R, "-dhooks", "--model", "--weird-model-name"]),
    ("pointer", ["bash", "/opt/kael/pointer_runner.sh", "/srv/p", "--allowedTools", "Bash,Read"],
     ["claude", "-p", "--resume", R, "--allowedTools", "Bash,Read"]),
]

REFUSED: list[tuple[str, Any, str]] = [
    ("shell", "claude --channels a | tee log", "'|'"),
    ("shell", "claude --channels a; echo done", "';'"),
    ("shell", "claude --channels a > /tmp/log", "'>'"),
    ("shell", "claude $CLAUDE_FLAGS", "'$CLAUDE_FLAGS' may expand to several words"),
    ("shell", "claude --x $(cat flags)", "may expand to several words"),
    ("shell", "claude --x *.json", "may expand to several words"),
    ("shell", "claude --x 'unterminated", "unterminated ' quote"),
    ("shell", "if true; then claude; fi", "';'"),
    ("shell", "echo claude-is-not-here", "no word names Claude Code"),
    ("shell", "echo hi && claude", "only `cd DIR &&` may come before"),
    ("shell", "exec -a claude-x claude", "exec with options"),
    ("argv", ["bash", "-lc", "claude -c | logger"], "'|'"),
    ("argv", ["bash", "/usr/local/bin/start-claude.sh"], "no word names Claude Code"),
    ("argv", ["bash", "-c"], "without a command string"),
    ("argv", ["claude", "-cp"], "option cluster '-cp'"),
    ("argv", ["claude", "--session-id"], "without a value"),
    ("argv", ["claude", "--model"], "--model is given without a value"),
    ("argv", ["claude", "--no-such-option", "fix the bug"],
     "whether 'fix the bug' is its value or the prompt cannot be told"),
    ("exec_start", exec_start("/usr/bin/claude $CLAUDE_FLAGS"), "systemd expands at start"),
    ("exec_start", exec_start("/usr/bin/script -qfc claude --continue /dev/null"),
     "cannot be told from its other arguments"),
    ("exec_start", exec_start("/usr/bin/claude") + " ; " + exec_start("/usr/bin/claude")[10:],
     "2 ExecStart commands"),
    ("exec_start", "ExecStart=", "not an ExecStart value"),
    ("tmux", '"claude', "unterminated"),
    ("tmux", '"npx -y @anthropic-ai/claude-code --model opus"', "runs through npx"),
    ("argv", ["node", "/home/u/.npm/_npx/6a9f0c/node_modules/@anthropic-ai/claude-code/cli.js",
              "--model", "opus"], "from npx's cache"),
    ("tmux", "", "no start command"),
]


def derive(how: str, start: Any) -> Any:
    return {"argv": cli.resume_from_argv, "exec_start": cli.resume_from_exec_start,
            "unit_argv": cli.resume_from_unit_argv, "tmux": cli.resume_from_tmux,
            "shell": cli.resume_from_shell,
            "pointer": cli.resume_from_pointer_runner}[how](start)


@pytest.mark.parametrize(("how", "start", "expected"), DERIVED)
def test_resume_command(how: str, start: Any, expected: list[str]) -> None:
    resume = derive(how, start)
    assert resume.argv == expected
    parse_config({"project_dir": "/p", "resume_command": resume.argv})  # the engine takes it
    # What the engine's doctor will check later: no flag of the start command is lost.
    assert cli.missing_flags(resume.claude_args, resume.resume_args) == []


@pytest.mark.parametrize(("how", "start", "message"), REFUSED)
def test_refused_with_what_was_seen(how: str, start: Any, message: str) -> None:
    with pytest.raises(cli.StartCommandError) as refused:
        derive(how, start)
    assert message in str(refused.value)


def test_every_option_of_claude_help_with_its_arity() -> None:
    """The option table is the pinned Claude Code's own: every option `claude --help` lists is
    in it, spelled as commander declares it (which gives the arity)."""
    if not REAL_CLAUDE.exists():
        pytest.skip("the pinned Claude Code is not installed (.ci/setup)")
    shown = subprocess.run([str(REAL_CLAUDE), "--help"], capture_output=True, text=True,
                           timeout=60, check=True).stdout
    options = shown.partition("\nOptions:\n")[2].partition("\nCommands:\n")[0]
    specs = [m.group(1) for m in re.finditer(r"^  (-\S.*?)(?:  |$)", options, re.MULTILINE)]
    assert len(specs) > 60 and "--model <model>" in specs
    assert sorted(set(specs) - set(role_command_line.OPTION_SPECS)) == []


def _doctor_check(resume_command: list[str], live_argv: list[str]) -> Check:
    facts = Facts(parse_config({"project_dir": "/p", "resume_command": resume_command}),
                  datetime.now(UTC), timedelta(minutes=5), {})
    facts.__dict__["claude_process"] = (4242, live_argv)  # the live process, as doctor reads it
    return resume.check_resume_command(facts)


def test_doctor_fails_a_resume_command_that_carries_the_prompt() -> None:
    """What the installer wrote before options had their arity: the prompt kept as if it were
    --model's second value, sent again at every switch."""
    live = ["/usr/local/bin/claude", "--continue", "--model", "opus", "fix the bug"]
    check = _doctor_check(["claude", "--resume", R, "--model", "opus", "fix the bug"], live)
    assert not check.ok and "fix the bug" in check.detail
    assert _doctor_check(["/usr/local/bin/claude", "--resume", R, "--model", "opus"], live).ok
    start_script = ["/usr/local/bin/claude-start", R, "--model", "opus"]
    assert _doctor_check(start_script, live).ok  # a start script of the household's own


# -- the module, run as Ansible runs it --------------------------------------------------------


def test_module_keeps_the_incident_flags(run_module: RunModule) -> None:
    start = ["claude", "--continue", *INCIDENT_FLAGS]
    result = run_module("claude_start_command", {"argv": start, "live_argv": start})
    assert not result["changed"] and result["live_checked"]
    assert result["resume_command"] == ["claude", "--resume", R, *INCIDENT_FLAGS]
    assert result["dropped"] == ["--continue"]
    assert result["flags"] == [["--channels", "plugin:telegram@claude-plugins-official"],
                               ["--dangerously-load-development-channels", "server:companion"],
                               ["--thinking-display", "summarized"]]


def test_module_fails_when_the_live_process_has_flags_the_start_command_lacks(
        run_module: RunModule) -> None:
    """The 0815 incident: the recorded command lost the channel flags the live process has."""
    live = ["claude", "--resume", UUID, *INCIDENT_FLAGS]
    result = run_module("claude_start_command", {"argv": ["claude", "--continue"],
                                                 "live_argv": live})
    assert result["failed"]
    assert "--dangerously-load-development-channels server:companion" in result["msg"]
    assert "deaf" in result["msg"]
    assert [g[0] for g in result["missing"]] == ["--channels",
                                                 "--dangerously-load-development-channels",
                                                 "--thinking-display"]


def test_module_falls_back_to_the_live_process_for_a_shell_pane(run_module: RunModule) -> None:
    live = ["claude", *INCIDENT_FLAGS]
    args = {"tmux_start_command": "", "live_argv": live}
    assert run_module("claude_start_command", args)["failed"]
    result = run_module("claude_start_command", {**args, "fallback_to_live": True})
    assert result["source"] == "live"
    assert result["resume_command"] == ["claude", "--resume", R, *INCIDENT_FLAGS]


def test_module_names_an_expansion_as_the_cause(run_module: RunModule) -> None:
    """`"$MODEL"` is not a lost flag: the shell fills it in at run time, so the start command
    cannot be compared with the live process, and the refusal says so."""
    result = run_module("claude_start_command", {
        "shell_command": 'claude --model "$MODEL" -c', "live_argv": ["claude", "--model", "opus"]})
    assert result["failed"] and "would lose" not in result["msg"]
    assert '"$MODEL", which the shell expands when it runs' in result["msg"]
    assert "--model opus" in result["msg"]


def test_module_reads_a_process_cmdline(run_module: RunModule) -> None:
    import os
    result = run_module("claude_start_command", {"pid": os.getpid()})
    assert result["failed"] and "no word names Claude Code" in result["msg"]


def test_module_refusal_names_the_source(run_module: RunModule) -> None:
    result = run_module("claude_start_command", {"shell_command": "claude -c | tee x"})
    assert result["failed"] and result["msg"].startswith("shell_command: ")


def test_module_check_mode_gives_the_same_answer(run_module: RunModule) -> None:
    args = {"exec_start": exec_start("/usr/bin/claude " + " ".join(INCIDENT_FLAGS))}
    assert run_module("claude_start_command", args, check=True)["resume_command"] == \
        run_module("claude_start_command", args)["resume_command"]


def test_module_wants_exactly_one_source(run_module: RunModule) -> None:
    assert run_module("claude_start_command", {})["failed"]
    assert run_module("claude_start_command", {"argv": ["claude"], "shell_command": "claude"})[
        "failed"]


# -- one logic with the engine's doctor -------------------------------------------------------

PACKAGE_DIR = REPO / "src" / "kael_thread_rebuild" / "claude_code"
ROLE_PACKAGE = PLUGINS / "module_utils" / PACKAGE


def test_the_module_utils_are_copies_of_the_packages_modules() -> None:
    """The doctor and the installer share one parser: the module runs the collection's copy of
    the package's modules (tests/installer/test_role_utils.py checks the copies), the doctor the
    package's own."""
    assert cli.missing_flags.__code__.co_filename == str(ROLE_PACKAGE / "command_line.py")
    assert resume.missing_flags is command_line.missing_flags  # the doctor imports it, no copy


def test_ansible_ships_the_module_utils_package_to_the_host(tmp_path: Path) -> None:
    """A real `ansible localhost -m kael.appliance.claude_start_command`: the module runs on the
    "managed host" with the package's modules, byte for byte (AnsiballZ follows their relative
    imports)."""
    env = ansible_env(tmp_path)
    env["ANSIBLE_KEEP_REMOTE_FILES"] = "1"
    start = ["bash", "-lc", "claude --continue " + shlex.join(INCIDENT_FLAGS)]
    proc = subprocess.run(
        [str(VENV_BIN / "ansible"), "localhost", "-c", "local", "-m",
         "kael.appliance.claude_start_command",
         "-e", f"ansible_python_interpreter={sys.executable}", "-a",
         json.dumps({"argv": start})], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.partition(" => ")[2])
    assert result["resume_command"] == [
        "bash", "-lc", "claude --resume " + R + " " + shlex.join(INCIDENT_FLAGS)]
    assert result["wrappers"] == ["bash -lc"]
    (payload,) = (tmp_path / "ansible-remote").glob("*/AnsiballZ_claude_start_command.py")
    exploded = subprocess.run([sys.executable, str(payload), "explode"], cwd=payload.parent,
                              capture_output=True, text=True, timeout=60, check=False)
    assert exploded.returncode == 0, exploded.stdout + exploded.stderr
    shipped = (payload.parent / "debug_dir" / "ansible_collections" / "kael" / "appliance"
               / "plugins" / "module_utils" / PACKAGE)
    for name in ("command_line.py", "spellings.py", "start_command.py"):  # what the module uses
        assert name in SHIPPED
        assert (shipped / name).read_bytes() == (PACKAGE_DIR / name).read_bytes()


#: Claude Code's own encoding (JavaScript, as read from the 2.1.328 source; see the Claude Code
#: facts notes), run by node: an oracle independent of the Python port under test.
ENCODE_JS = """
const w = s => s.replace(/[^a-zA-Z0-9]/g, "-");
const hash31 = s => { let h = 0;
                      for (let i = 0; i < s.length; i++) h = h * 31 + s.charCodeAt(i) | 0;
                      return h; };
const enc = p => { const n = w(p); return n.length <= 200 ? n
                   : `${n.slice(0, 200)}-${Math.abs(hash31(p)).toString(36)}`; };
process.stdout.write(JSON.stringify(JSON.parse(process.argv[1]).map(enc)));
"""
WORKDIRS = ["/home/user/my_proj.v2", "/srv/家/claude", "/" + "x" * 260, "/tmp/" + "é" * 150,
            "/srv/companion 🦊/work", "/tmp/" + "🦊" * 120, "/a/" + "b-" * 150]


def test_project_dir_encoding_matches_claude_codes_own() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    expected = json.loads(subprocess.run([node, "-e", ENCODE_JS, json.dumps(WORKDIRS)],
                                         capture_output=True, text=True, check=True,
                                         timeout=60).stdout)
    assert [role_project_dir.encode_project_dir(w) for w in WORKDIRS] == expected
    assert [project_dir.encode_project_dir(w) for w in WORKDIRS] == expected  # the engine's too


def test_filter_plugin_gives_the_module_answer() -> None:
    filters = load_filters("kael")
    start = ["claude", "-c", *INCIDENT_FLAGS]
    assert filters.kael_resume_command(start) == cli.resume_from_argv(start).argv
    assert filters.kael_resume_command("exec claude -c --channels a") == [
        "claude", "--resume", R, "--channels", "a"]
    lines = ["instance\tx", "state\t/s", "mount\t/p\trw\tuser", "optional\t/o\tro\tuser",
             "optional\t/n\tro\tuser", "mount\t/run/dbus\trw\troot",
             "env\tXDG_RUNTIME_DIR=/run/user/1"]
    assert filters.kael_mount_paths(lines) == ["/p", "/o", "/n", "/run/dbus"]
    mine, root = {"exists": True, "uid": 7}, {"exists": True, "uid": 0}
    args = filters.kael_mount_args(lines, [mine, mine, {"exists": False}, root],
                                   ["/p", "/o", "/n", "/run/dbus"], 7)
    assert args == {"mounts": [
        {"type": "bind", "source": "/p", "target": "/p", "read_only": False},
        {"type": "bind", "source": "/o", "target": "/o", "read_only": True},
        {"type": "bind", "source": "/run/dbus", "target": "/run/dbus", "read_only": False}],
        "env": {"XDG_RUNTIME_DIR": "/run/user/1"}, "refused": []}
    assert filters.kael_bind_args([{"Source": "/p", "Target": "/p", "ReadOnly": False},
                                   {"Source": "/o", "Target": "/o", "ReadOnly": True}]) == [
        "--mount=type=bind,source=/p,target=/p", "--mount=type=bind,source=/o,target=/o,readonly"]
    assert filters.kael_ro_mounts(["/f"]) == ["--mount=type=bind,source=/f,target=/f,readonly"]


@pytest.mark.parametrize(("stat", "real", "why"), [
    ({"exists": False}, "/p", "/p does not exist on this host"),
    ({"exists": True, "islnk": True, "uid": 7}, "/etc/cron.d",
     "/p is not its real path (/etc/cron.d): a symlink in a mount is refused"),
    ({"exists": True, "uid": 7}, "/etc/cron.d/p",
     "/p is not its real path (/etc/cron.d/p): a symlink in a mount is refused"),
    ({"exists": True, "uid": 0}, "/p",
     "/p belongs to uid 0, not to the Claude user (uid 7): refused as a mount"),
])
def test_the_filter_refuses_what_lib_sh_refuses(stat: dict[str, object], real: str,
                                                 why: str) -> None:
    """A missing source, a symlink (itself or above it) or a source of the wrong owner: one
    line naming it, as image/lib.sh's kael_mountable says it; an optional symlink counts as
    there (and is refused), a root path is refused when the user's."""
    filters = load_filters("kael")
    for kind in ("mount", "optional"):
        args = filters.kael_mount_args([f"{kind}\t/p\tro\tuser"], [stat], [real], 7)
        if kind == "optional" and not stat["exists"]:
            assert args["refused"] == [] and args["mounts"] == []
        else:
            assert args["refused"] == [why]
    root = filters.kael_mount_args(["mount\t/run/dbus\trw\troot"],
                                   [{"exists": True, "uid": 7}], ["/run/dbus"], 7)
    assert root["refused"] == [
        "/run/dbus belongs to uid 7, not to root: refused as a mount"]
    either = filters.kael_mount_args(["mount\t/c\tro\troot-or-user"],
                                     [{"exists": True, "uid": 9}], ["/c"], 7)
    assert either["refused"] == [
        "/c belongs to uid 9, not to root or the Claude user (uid 7): refused as a mount"]


@pytest.mark.parametrize("activation", ["tmux", "pointer", "systemd"])
def test_the_filter_takes_every_line_the_image_prints(tmp_path: Path, activation: str) -> None:
    """What `kael-mounts` prints for a config of each base, the role's filter turns into docker
    arguments (a fact line the filter does not know failed every install)."""
    import importlib.util

    filters = load_filters("kael")
    spec = importlib.util.spec_from_file_location("kael_mounts", REPO / "image" / "mounts.py")
    assert spec is not None and spec.loader is not None
    mounts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mounts)
    pointer = tmp_path / "pointer" / "session"
    config = parse_config({
        "project_dir": str(tmp_path), "state_dir": str(tmp_path / "state"),
        "activation": activation, "tmux_target": "companion-DO-NOT-CREATE:0.0",
        "resume_pointer_path": str(pointer), "systemd_unit": "claude-DO-NOT-CREATE.service"})
    lines = ["\t".join(line) for line in mounts.facts(config, tmp_path / "c.toml", 1000)]
    assert f"activation\t{activation}" in lines
    paths = filters.kael_mount_paths(lines)
    args = filters.kael_mount_args(lines, [{"exists": True, "uid": 1000}] * len(paths), paths,
                                   1000)
    assert {"type": "bind", "source": str(tmp_path), "target": str(tmp_path),
            "read_only": False} in args["mounts"]
    assert [why for why in args["refused"] if "not to root:" not in why] == []
    assert args["env"][CONFIG_ENV] == str(tmp_path / "c.toml")
