"""Run the real Kimi Code CLI (the advisor) in isolation against the loopback provider stand-in.

Every run gets its own ``KIMI_CODE_HOME`` (config, sessions, logs) and ``HOME``; its
``config.toml`` names one provider, the stand-in of :mod:`tests.support.standin_openai`, with
telemetry, the model catalogue refresh and auto-update off, so the CLI reaches nothing else::

    with StandinOpenAI() as api, isolated_kimi_env(api.url) as kimi:
        result = run_kimi(kimi, "hi")            # in kimi.cwd, a project of its own
        assert result.session_id and result.answer
        bodies = api.chat_bodies()

The binary is ``$KAEL_TEST_KIMI_BIN`` or the pinned install of ``.ci/install-kimi-code``
(``.tools/kimi-code/bin/kimi``, the CLI with the Node it needs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .claude_env import ci_version, repo_root
from .standin_openai import MODEL

__all__ = [
    "KIMI_BIN_ENV",
    "KimiEnv",
    "KimiResult",
    "find_kimi_binary",
    "isolated_kimi_env",
    "kimi_available",
    "kimi_config_toml",
    "make_kimi_env",
    "parse_stream_json",
    "pinned_kimi_version",
    "run_kimi",
]

KIMI_BIN_ENV = "KAEL_TEST_KIMI_BIN"
#: The provider and model names of the isolated config.
PROVIDER = "standin"
MODEL_ALIAS = "advisor"
STANDIN_KEY = "sk-standin-kael-advisor-tests"


def find_kimi_binary() -> Path:
    """``$KAEL_TEST_KIMI_BIN`` or ``.tools/kimi-code/bin/kimi`` (see ``.ci/install-kimi-code``)."""
    override = os.environ.get(KIMI_BIN_ENV)
    path = Path(override) if override else repo_root() / ".tools" / "kimi-code" / "bin" / "kimi"
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise FileNotFoundError(f"Kimi Code CLI not found at {path} (run .ci/setup)")
    return path


def kimi_available() -> bool:
    try:
        find_kimi_binary()
    except FileNotFoundError:
        return False
    return True


def pinned_kimi_version() -> str:
    """KIMI_CODE_VERSION of `.ci/versions.env`."""
    return ci_version("KIMI_CODE_VERSION")


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def kimi_config_toml(base_url: str, *, model: str = MODEL, api_key: str = STANDIN_KEY,
                     max_attempts_per_step: int = 2, max_context_size: int = 128000) -> str:
    """A ``config.toml`` with one provider at BASE_URL (``…/v1``) and nothing that phones home.

    ``max_attempts_per_step`` 2 makes a provider that is down fail in about 3 s (10 tries and
    about 150 s by default).
    """
    return "\n".join([
        f"default_model = {_toml_string(MODEL_ALIAS)}",
        "telemetry = false",
        "",
        f"[providers.{PROVIDER}]",
        'type = "openai"',
        f"base_url = {_toml_string(base_url)}",
        f"api_key = {_toml_string(api_key)}",
        "",
        f"[models.{MODEL_ALIAS}]",
        f"provider = {_toml_string(PROVIDER)}",
        f"model = {_toml_string(model)}",
        f"max_context_size = {max_context_size}",
        "",
        "[model_catalog]",
        "refresh_on_start = false",
        "",
        "[loop_control]",
        f"max_attempts_per_step = {max_attempts_per_step}",
        "",
    ])


@dataclass
class KimiEnv:
    """One isolated Kimi Code state: ``KIMI_CODE_HOME``, ``HOME`` and a project to run in."""

    root: Path
    kimi_home: Path
    home: Path
    cwd: Path
    base_url: str
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def config_path(self) -> Path:
        return self.kimi_home / "config.toml"

    @property
    def env(self) -> dict[str, str]:
        """The CLI's whole environment (nothing of the caller's but PATH)."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TMPDIR": str(self.root / "tmp"),
            "KIMI_CODE_HOME": str(self.kimi_home),
            "KIMI_CODE_NO_AUTO_UPDATE": "1",
            "KIMI_DISABLE_TELEMETRY": "1",
        }
        env.update(self.extra_env)
        return env

    def sessions(self) -> list[Path]:
        """The session folders (``sessions/wd_<dir>_<hash>/session_<uuid>``), oldest first."""
        folders = self.kimi_home.glob("sessions/wd_*/session_*")
        return sorted((p for p in folders if p.is_dir()), key=lambda p: p.stat().st_mtime_ns)

    def write_config(self, **options: Any) -> None:
        """Rewrites ``config.toml`` (see :func:`kimi_config_toml` for OPTIONS)."""
        self.config_path.write_text(kimi_config_toml(self.base_url, **options))


def make_kimi_env(root: Path, base_url: str, *, cwd: Path | None = None,
                  **config: Any) -> KimiEnv:
    """Lays out an isolated Kimi Code state under ROOT (which must exist): ``root/kimi-home`` is
    ``KIMI_CODE_HOME`` with its ``config.toml``, ``root/home`` is HOME, CWD defaults to
    ``root/project``. CONFIG goes to :func:`kimi_config_toml`."""
    root = Path(root)
    env = KimiEnv(root=root, kimi_home=root / "kimi-home", home=root / "home",
                  cwd=Path(cwd) if cwd is not None else root / "project", base_url=base_url)
    for folder in (env.kimi_home, env.home, env.cwd, root / "tmp"):
        folder.mkdir(parents=True, exist_ok=True)
    env.cwd = Path(os.path.realpath(env.cwd))
    env.write_config(**config)
    return env


@contextmanager
def isolated_kimi_env(base_url: str, **options: Any) -> Iterator[KimiEnv]:
    """A :func:`make_kimi_env` in a fresh temporary directory, removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="kael-kimi-"))
    try:
        yield make_kimi_env(root, base_url, **options)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def parse_stream_json(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects of ``--output-format stream-json`` (one a line; other lines skipped)."""
    lines: list[dict[str, Any]] = []
    for raw in stdout.splitlines():
        try:
            item = json.loads(raw)
        except ValueError:
            continue
        if isinstance(item, dict):
            lines.append(item)
    return lines


@dataclass(frozen=True)
class KimiResult:
    returncode: int
    stdout: str
    stderr: str
    lines: list[dict[str, Any]]

    @property
    def session_id(self) -> str | None:
        """The id of ``session.resume_hint`` (the session the run created or continued)."""
        for line in self.lines:
            if line.get("role") == "meta" and line.get("type") == "session.resume_hint":
                return str(line.get("session_id"))
        return None

    @property
    def answer(self) -> str:
        """The assistant's texts, joined by blank lines."""
        return "\n\n".join(str(line["content"]) for line in self.lines
                           if line.get("role") == "assistant" and line.get("content"))

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return [call for line in self.lines if line.get("role") == "assistant"
                for call in line.get("tool_calls") or []]

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("role") == "tool"]


def run_kimi(env: KimiEnv, prompt: str, *, session: str | None = None,
             agent_file: Path | None = None, args: Sequence[str] = (),
             cwd: Path | None = None, extra_env: Mapping[str, str] | None = None,
             timeout: float = 60) -> KimiResult:
    """``kimi [-S SESSION] [--agent-file FILE] -p PROMPT --output-format stream-json [args…]``
    in CWD (default ``env.cwd``)."""
    cmd = [str(find_kimi_binary())]
    if session:
        cmd += ["-S", session]
    if agent_file is not None:
        cmd += ["--agent-file", str(agent_file)]
    cmd += ["-p", prompt, "--output-format", "stream-json", *args]
    proc = subprocess.run(cmd, cwd=cwd or env.cwd, env={**env.env, **(extra_env or {})},
                          capture_output=True, text=True, timeout=timeout, check=False)
    return KimiResult(proc.returncode, proc.stdout, proc.stderr, parse_stream_json(proc.stdout))
