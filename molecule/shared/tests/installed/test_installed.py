"""The verify after the install and the live drill: what a household must find on its host,
read as JSON (docker inspect, the TOML config, settings.json, ~/.claude.json, the drill's
findings), never by grepping."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from conftest import (
    PRISTINE,
    PROMPTING,
    READ_ONLY,
    SERVER,
    WRAPPER,
    config_of,
    home_of,
    instances,
    read_json,
    run_json,
    run_playbook,
    run_playbook_once,
)
from kael_thread_rebuild import __version__
from kael_thread_rebuild.doctor.runner import CHECKS

SESSION_FLAGS = {"--continue", "-c"}


def without_session_flags(argv: list[str]) -> list[str]:
    """ARGV without --continue/-c and --resume X: what every start must keep word for word."""
    kept, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in ("--resume", "-r"):
            skip = True
        elif word not in SESSION_FLAGS:
            kept.append(word)
    return kept


def typed_claude_words(place: dict[str, Any]) -> list[str]:
    """The words of Claude Code the user typed: the start command's, or (pointer base) `-p`
    and the arguments the runner passes to every `claude -p` call."""
    typed = shlex.split(place["start_command"])
    if place["base"] != "pointer":
        return typed
    at = next(i for i, word in enumerate(typed) if word.endswith("/pointer_runner.sh"))
    return ["claude", "-p", *typed[at + 2:]]


def flags_of_call(argv: list[str]) -> list[str]:
    """A Claude Code argv without the program, its session flags and a prompt after `--`."""
    words = argv[1:argv.index("--")] if "--" in argv else argv[1:]
    return without_session_flags([w for i, w in enumerate(words)
                                  if w != "--session-id" and words[i - 1:i] != ["--session-id"]])


def ours_hook(hook: dict[str, Any]) -> bool:
    return "kael-hook" in str(hook.get("command", ""))


def ours(group: dict[str, Any]) -> bool:
    return any(ours_hook(h) for h in group.get("hooks") or [])


def settings_now_and_before(host: Any, user: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The user's settings now, without the advisor's entries (its own test checks them), and
    as the user had them."""
    now = read_json(host, f"{home_of(host, user)}/.claude/settings.json")
    before = read_json(host, f"{PRISTINE}/.claude/settings.json")
    return without_advisor(now, before), before


def without_advisor(now: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """NOW without what the kael_advisor role adds (its rules, its prompt hook's group and
    MCP_TOOL_TIMEOUT), each container dropped again where BEFORE had none."""
    now = json.loads(json.dumps(now))
    for outer, inner, mine in (
            ("permissions", "allow", lambda rule: str(rule).startswith(ADVISOR_RULE)),
            ("permissions", "ask", lambda rule: str(rule).startswith(ADVISOR_RULE)),
            ("hooks", "UserPromptSubmit", lambda group: ADVISOR_HOOK in json.dumps(group))):
        found = now.get(outer, {}).get(inner)
        if isinstance(found, list):
            now[outer][inner] = [item for item in found if not mine(item)]
            if not now[outer][inner] and inner not in before.get(outer, {}):
                del now[outer][inner]
    if "MCP_TOOL_TIMEOUT" not in before.get("env", {}):
        now.get("env", {}).pop("MCP_TOOL_TIMEOUT", None)
    return now


def test_the_daemon_runs_as_the_claude_user_hardened(host: Any,
                                                     households: list[dict[str, Any]]) -> None:
    for place in households:
        (daemon,) = run_json(host, "docker", "inspect", f"{SERVER}-{place['instance']}")
        uid, gid = host.user(place["user"]).uid, host.user(place["user"]).gid
        assert daemon["State"]["Running"], daemon["State"]
        assert daemon["Config"]["User"] == f"{uid}:{gid}"
        config = daemon["HostConfig"]
        assert config["ReadonlyRootfs"] is True
        assert config["CapDrop"] == ["ALL"] and not config["CapAdd"]
        assert "no-new-privileges" in config["SecurityOpt"]
        assert config["NetworkMode"] == "none" and config["Privileged"] is False
        assert not [b for b in config["Binds"] or [] if "docker.sock" in b]
        # kael_appliance_cpus and kael_appliance_memory (no swap beyond it); bind mounts only:
        # `volumes` (-v) would have Docker create a missing source as root.
        assert config["NanoCpus"] == 1_000_000_000, config["NanoCpus"]
        assert config["Memory"] == config["MemorySwap"] == 2 * 1024**3, config["Memory"]
        assert not config["Binds"], config["Binds"]
        assert {m["Type"] for m in config["Mounts"]} == {"bind"}, config["Mounts"]
        assert not [m for m in config["Mounts"] if "docker.sock" in m["Source"]]


def test_the_resume_command_is_the_typed_command_with_an_absolute_program(
        host: Any, households: list[dict[str, Any]]) -> None:
    for place in households:
        resume = config_of(host, place["instance"])["resume_command"]
        typed = typed_claude_words(place)
        program = host.file(resume[0])
        assert resume[0].startswith("/") and resume[0].endswith("/" + typed[0]), resume
        assert program.exists and program.mode & 0o111, resume[0]
        assert "{session_id}" in resume and resume[resume.index("{session_id}") - 1] == \
            "--resume"
        assert without_session_flags(resume[1:]) == without_session_flags(typed[1:])


ADVISOR_RULE = "mcp__advisor-mcp__"
ADVISOR_HOOK = "kael-advisor-hook.pyz"


def test_settings_keep_the_users_own_entries(host: Any,
                                             households: list[dict[str, Any]]) -> None:
    for place in households:
        now, before = settings_now_and_before(host, place["user"])
        hooks = [h for g in now["hooks"]["Stop"] for h in g["hooks"] if not ours_hook(h)]
        assert hooks == [h for g in before["hooks"]["Stop"] for h in g["hooks"]]
        assert {k: v for k, v in now["hooks"].items() if k != "Stop"} == \
            {k: v for k, v in before["hooks"].items() if k != "Stop"}
        assert now["permissions"]["allow"] == [*before["permissions"]["allow"], *READ_ONLY]
        assert {k: v for k, v in now["permissions"].items() if k != "allow"} == \
            {k: v for k, v in before["permissions"].items() if k != "allow"}
        assert not set(PROMPTING) & set(now["permissions"]["allow"])
        assert {k: v for k, v in now.items() if k not in ("hooks", "permissions")} == \
            {k: v for k, v in before.items() if k not in ("hooks", "permissions")}


def test_the_advisor_is_merged_beside_the_users_own(host: Any) -> None:
    """Each kael_advisor user: the prompt hook after the user's own, two tools allowed and three
    asked, the MCP server through the wrapper, the CLAUDE.md block, the slash commands, the
    provider in a config.toml of the user's alone."""
    for entry in host.ansible.get_variables().get("kael_advisor", []):
        home = home_of(host, entry["user"])
        now = read_json(host, f"{home}/.claude/settings.json")
        before = read_json(host, f"{PRISTINE}/.claude/settings.json")
        prompt = now["hooks"]["UserPromptSubmit"]
        assert prompt[:-1] == before["hooks"].get("UserPromptSubmit", [])
        assert ADVISOR_HOOK in prompt[-1]["hooks"][0]["command"]
        allowed = [r for r in now["permissions"]["allow"] if r.startswith(ADVISOR_RULE)]
        asked = [r for r in now["permissions"].get("ask", []) if r.startswith(ADVISOR_RULE)]
        assert sorted(allowed) == [f"{ADVISOR_RULE}advisor_list_tasks",
                                   f"{ADVISOR_RULE}advisor_poll"]
        assert len(asked) == 3 and f"{ADVISOR_RULE}advisor_consult" in asked
        assert now["env"]["MCP_TOOL_TIMEOUT"]
        state = read_json(host, f"{home}/.claude.json")
        server = state["mcpServers"]["advisor-mcp"]
        assert [server["command"], *server["args"]] == [
            "sudo", "-n", "/usr/local/lib/kael-thread-rebuild/kael-run", "advisor", entry["user"]]
        assert "<!-- kael-advisor: begin" in host.file(f"{home}/.claude/CLAUDE.md").content_string
        for name in ("advisor", "blueprint", "review"):
            assert host.file(f"{home}/.claude/commands/{name}.md").user == entry["user"]
        config = host.file(f"{home}/.kimi-code/config.toml")
        assert config.user == entry["user"] and config.mode == 0o600
        assert host.file(f"/etc/sudoers.d/kael-advisor-{entry['user']}").mode == 0o440


def test_our_stop_hook_is_once_in_a_group_of_its_own(host: Any,
                                                     households: list[dict[str, Any]]) -> None:
    for place in households:
        now, before = settings_now_and_before(host, place["user"])
        stop = now["hooks"]["Stop"]
        if place["base"] == "pointer":  # its runner forwards every Stop: no hook of ours
            assert stop == before["hooks"]["Stop"], stop
            continue
        (group,) = [g for g in stop if ours(g)]
        assert len(group["hooks"]) == 1 and set(group) <= {"hooks", "matcher"}
        assert [g for g in stop if not ours(g)] == before["hooks"]["Stop"]


def test_foreign_escapes_and_numbers_keep_their_bytes(host: Any,
                                                      households: list[dict[str, Any]]) -> None:
    for place in households:
        raw = host.file(f"{home_of(host, place['user'])}/.claude/settings.json").content_string
        assert '"caf\\u00e9 \\u6f22\\u5b57"' in raw and '"timeout": 1.50' in raw, raw


def test_the_mcp_server_is_registered_for_the_user_through_the_wrapper(
        host: Any, households: list[dict[str, Any]]) -> None:
    for place in households:
        state = read_json(host, f"{home_of(host, place['user'])}/.claude.json")
        server = state["mcpServers"][SERVER]
        argv = [server["command"], *server.get("args", [])]
        assert server.get("type", "stdio") == "stdio"
        assert argv == ["sudo", "-n", WRAPPER, "mcp", place["instance"]], argv
        wrapper = host.file(WRAPPER)
        assert wrapper.user == "root" and not wrapper.mode & 0o022, (wrapper.user, wrapper.mode)


def test_the_claude_user_has_no_docker(host: Any, households: list[dict[str, Any]]) -> None:
    for place in households:
        assert "docker" not in host.user(place["user"]).groups
        denied = host.run(shlex.join(["runuser", "-u", place["user"], "--", "docker", "ps"]))
        assert denied.rc != 0 and "permission denied" in denied.stderr.lower(), denied.stderr


def test_the_stop_hook_goes_through_kael_hook_for_its_instance(
        host: Any, households: list[dict[str, Any]]) -> None:
    for place in households:
        if place["base"] == "pointer":  # the runner's KAEL_RUN: hook, wait, start-failed
            rule = host.file(f"/etc/sudoers.d/{SERVER}-{place['instance']}").content_string
            uid = host.user(place["user"]).uid
            roles = ("mcp", "hook", "wait", "start-failed")
            assert f"#{uid} ALL=(root) NOPASSWD: " + ", ".join(
                f"{WRAPPER} {role} {place['instance']}" for role in roles) in rule, rule
            continue
        now, _ = settings_now_and_before(host, place["user"])
        (ours_,) = [h for g in now["hooks"]["Stop"] for h in g["hooks"] if ours_hook(h)]
        words = shlex.split(ours_["command"])
        assert words[:5] == ["/usr/local/bin/kael-hook", "--instance", place["instance"],
                             "--run", WRAPPER], words
        assert "docker" not in ours_["command"], ours_["command"]


def test_the_doctor_is_green_in_check_mode_with_every_check(
        host: Any, households: list[dict[str, Any]]) -> None:
    """Doctor in the appliance, every check that applies to the base run and passed on every
    instance; in check mode (read-only) nothing changes."""
    done = run_playbook_once("doctor.yml", "--check")
    assert (done.failed(host), done.changed(host)) == (0, 0), done.tail()
    for place in households:
        # The pointer runner starts Claude Code with its own command and forwards every Stop.
        skipped = ["resume_command", "resume_start", "stop_hook", "mcp_loaded"] \
            if place["base"] == "pointer" else []
        # No warning: the drill restarted Claude Code, which now runs the MCP server
        # (mcp_loaded; it warned after the converge, molecule/shared/converge.yml).
        assert f"{place['instance']}: doctor green, {len(CHECKS) - len(skipped)} ok, warnings: " \
               f"none, skipped: {', '.join(skipped) or 'none'}" in done.out, done.tail()


UPGRADE = "kael-thread-rebuild:0.0.0-upgrade"


def leave_an_mcp_container_and_another_image(host: Any) -> tuple[str, str]:
    """On HOST: a leftover MCP server container of its first instance, and an installed image
    of another version than the daemon's. The instance's name and the container's."""
    name = instances(host)[0]["instance"]
    container = f"{SERVER}-{name}"
    image = run_json(host, "docker", "inspect", container)[0]["Config"]["Image"]
    left, relabel = f"{container}-mcp-left", f"{container}-relabel"
    for argv in (["docker", "create", "--label", "io.kael-thread-rebuild.role=mcp",
                  "--label", f"io.kael-thread-rebuild.instance={name}", "--name", left,
                  image, "--version"],
                 ["docker", "create", "--name", relabel, image],
                 ["docker", "commit", "--change",
                  f"LABEL org.opencontainers.image.version={UPGRADE.partition(':')[2]}",
                  relabel, UPGRADE]):
        done = host.run(shlex.join(argv))
        assert done.rc == 0, (argv, done.stderr)
    return name, left


def test_the_doctor_fails_on_a_left_mcp_container_and_another_image_version(
        all_hosts: list[Any]) -> None:
    """A leftover MCP server container of an instance, and an installed image of another
    version than the daemon's: every host fails, each check named with what it saw (one
    doctor run over all of them, as a household with several hosts runs it)."""
    left: dict[str, tuple[str, str]] = {}
    try:
        for host in all_hosts:
            left[host.backend.get_hostname()] = leave_an_mcp_container_and_another_image(host)
        failing = run_playbook("doctor.yml", "-e", f"kael_image={UPGRADE}")
    finally:
        for host in all_hosts:
            name = instances(host)[0]["instance"]
            host.run(f"docker rm -f {SERVER}-{name}-mcp-left {SERVER}-{name}-relabel; "
                     f"docker rmi {UPGRADE}")
    for host in all_hosts:
        name, container = left[host.backend.get_hostname()]
        assert failing.failed(host) == 1, failing.tail()
        assert re.search(rf"{name}: doctor is not green\..*mcp_containers: MCP server "
                         rf"containers of instance '{name}' left behind: 1 not running: "
                         rf"{container} \(Created\)", failing.out, re.DOTALL), failing.tail()
        assert re.search(rf"versions: the daemon {SERVER}-{name} runs version {__version__} "
                         rf"\(\w{{12}}\) but {UPGRADE} is 0\.0\.0-upgrade", failing.out), \
            failing.tail()


def test_the_live_drill_switched_carried_every_word_and_rolled_back(
        host: Any, households: list[dict[str, Any]]) -> None:
    for place in households:
        drill = read_json(host, f"/var/lib/kael-molecule/drill-{place['instance']}.json")
        assert drill["error"] == "", (drill["error"], drill.get("screen"))
        rebuild = drill["rebuild"]
        assert rebuild["status"] == "activated" and rebuild["requested_by"] == "mcp"
        assert drill["new_session"] == rebuild["new_session_id"] != drill["old_session"]
        assert [list(t) for t in drill["after_texts"]] == \
            [list(t) for t in drill["expected_texts"]]
        assert drill["after_non_text"] == []
        assert drill["old_session"] not in drill["new_argv"]
        assert flags_of_call(drill["new_argv"]) == flags_of_call(drill["old_argv"])
        assert drill["rollback"]["status"] == "rolled_back"
        assert drill["rollback"]["rollback_ok"] is True
        assert drill["back_session"] == drill["old_session"]
        assert [list(t) for t in drill["old_texts"]] == \
            [list(t) for t in drill["expected_old_texts"]]
        assert {"tool_use", "tool_result", "thinking"} <= set(drill["old_non_text"])
        print(f"drill {place['instance']}: downtime {drill['downtime_seconds']} s, "
              f"{len(drill['expected_texts']) - 1} speech items carried, "
              f"{len(drill['after_non_text'])} runtime blocks sent")
