"""`kael-advisor` by hand: --help explains, doctor checks without showing the key, tasks lists
a project's bindings, and a bad table is one line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from kael_advisor import pieces
from kael_advisor.places import table_path
from tests.advisor.advisor_env import CLI_BIN, prompt
from tests.advisor.kimi_fixture import Advised, advised, needs_kimi
from tests.support.kimi_env import STANDIN_KEY

__all__ = ["advised"]  # fixture


def _cli(*args: str, env: dict[str, str] | None = None,
         cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI_BIN), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=cwd, check=False)


def test_help_explains_the_commands_and_the_environment() -> None:
    done = _cli("--help")

    assert done.returncode == 0
    for word in ("doctor", "tasks", "pieces", "KAEL_ADVISOR_KIMI", "KIMI_CODE_HOME",
                 "KAEL_ADVISOR_SESSIONS", "kael-advisor-mcp", "kael-advisor-hook"):
        assert word in done.stdout, word


@needs_kimi
def test_doctor_sees_everything_and_never_the_key(advised: Advised) -> None:
    prompt(advised.sessions, "d0c70000-1111", advised.project)

    done = _cli("doctor", "--json", env=advised.env(), cwd=advised.project)

    checks = {check["name"]: check for check in json.loads(done.stdout)}
    assert done.returncode == 0, done.stdout
    assert {name: check["status"] for name, check in checks.items()} == {
        "kimi": "ok", "provider": "ok", "agent": "ok", "hook": "ok", "table": "ok"}
    assert "2.1.0" in checks["kimi"]["detail"] and "1 window(s)" in checks["hook"]["detail"]
    assert STANDIN_KEY not in done.stdout


def test_doctor_fails_without_kimi_provider_or_hook(tmp_path: Path) -> None:
    done = _cli("doctor", "--project", str(tmp_path), env={
        "KAEL_ADVISOR_KIMI": str(tmp_path / "no-kimi"), "KIMI_CODE_HOME": str(tmp_path / "k"),
        "KAEL_ADVISOR_SESSIONS": str(tmp_path / "none")})

    assert done.returncode == 1
    failed = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("fail")]
    assert failed == ["kimi", "provider", "hook"]


def test_tasks_lists_and_a_bad_table_is_one_line(tmp_path: Path) -> None:
    assert "no advisor tasks in this project yet" in _cli("tasks", cwd=tmp_path).stdout
    path = table_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("{oops")

    done = _cli("tasks", "--project", str(tmp_path))

    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "is not JSON" in done.stderr
    assert path.read_text() == "{oops"


def test_doctor_takes_a_provider_from_the_environment(tmp_path: Path) -> None:
    done = _cli("doctor", "--json", "--project", str(tmp_path), env={
        "KIMI_CODE_HOME": str(tmp_path / "k"), "KIMI_MODEL_NAME": "m1",
        "KIMI_MODEL_API_KEY": "sk-secret-DO-NOT-SHOW"})

    provider = next(c for c in json.loads(done.stdout) if c["name"] == "provider")
    assert provider["status"] == "ok" and "'m1' from the environment" in provider["detail"]
    assert "sk-secret" not in done.stdout


def test_pieces_names_the_config_dir_and_installs_the_slash_commands_by_hand(
        tmp_path: Path) -> None:
    """A user without the installer runs the printed lines: the slash commands and the
    advisor-discipline block land in Claude Code's config directory, the one settings.json
    is merged into."""
    config = tmp_path / "claude config"
    done = _cli("pieces", env={"CLAUDE_CONFIG_DIR": str(config)})

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"# merge into {config / 'settings.json'}:"
    shell = "\n".join(line for line in lines[lines.index(pieces.mcp_add_line()) + 1:])
    subprocess.run(["sh", "-ec", shell], check=True, timeout=30)
    for name, text in pieces.templates().items():
        assert (config / name).read_text() == text, name
    assert "/blueprint" in done.stdout
