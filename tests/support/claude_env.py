"""Run the real Claude Code binary in isolation: its own config dir, HOME, API stand-in and tmux.

Nothing here touches the machine's own ``~/.claude``, ``~/.claude.json`` or default tmux server:
every run gets a temporary ``CLAUDE_CONFIG_DIR`` and ``HOME``, and interactive runs use a private
tmux socket (``tmux -L <name>``) whose session names all contain ``DO-NOT-CREATE``.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "DEFAULT_ALLOW",
    "STREAM_JSON_ARGS",
    "ClaudeEnv",
    "ClaudePlace",
    "PrintResult",
    "TmuxClaude",
    "ci_version",
    "claude_available",
    "claude_version",
    "encode_project_path",
    "find_claude_binary",
    "isolated_claude_env",
    "java_string_hash",
    "make_claude_env",
    "mcp_log_dir",
    "mcp_log_lines",
    "project_dir_for",
    "repo_root",
    "run_print",
    "run_stream_turns",
    "tmux_available",
    "transcripts",
    "user_message_line",
    "wait_mcp_tools_taken",
]

#: Tools allowed without prompting in every isolated config (``claude -p`` cannot ask).
DEFAULT_ALLOW: tuple[str, ...] = ("Bash", "Read", "Agent")

#: The stand-in API key; Claude Code approves it by its last 20 characters.
STANDIN_API_KEY = "sk-ant-api03-standin-0000-kael-thread-rebuild-tests-0123456789"

_SESSION_MARK = "DO-NOT-CREATE"


# ------------------------------------------------------------------------------------ binary


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def ci_version(key: str) -> str:
    """A version the tests depend on, KEY of `.ci/versions.env`."""
    for line in (repo_root() / ".ci" / "versions.env").read_text().splitlines():
        name, _, value = line.partition("=")
        if name.strip() == key:
            return value.strip()
    raise LookupError(f".ci/versions.env sets no {key}")


def find_claude_binary() -> Path:
    """``$KAEL_TEST_CLAUDE_BIN`` or the pinned install under ``.tools/`` (see ``.ci/setup``)."""
    override = os.environ.get("KAEL_TEST_CLAUDE_BIN")
    path = (
        Path(override)
        if override
        else (repo_root() / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude")
    )
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise FileNotFoundError(f"Claude Code binary not found at {path} (run .ci/setup)")
    return path


def claude_available() -> bool:
    try:
        find_claude_binary()
    except FileNotFoundError:
        return False
    return True


def tmux_available() -> bool:
    return shutil.which("tmux") is not None


def claude_version(binary: Path | None = None) -> str:
    """The bare version string, e.g. ``2.1.328`` (run with a throwaway HOME and config dir)."""
    with tempfile.TemporaryDirectory(prefix="kael-claude-version-") as home:
        out = subprocess.run(
            [str(binary or find_claude_binary()), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env={
                "PATH": os.environ.get("PATH", ""),
                "HOME": home,
                "CLAUDE_CONFIG_DIR": os.path.join(home, "config"),
            },
        ).stdout
    return out.strip().split()[0]


# ------------------------------------------------------------------------ project dir naming


def java_string_hash(text: str) -> int:
    """Java ``String.hashCode`` over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-le")
    for i in range(0, len(data), 2):
        h = (h * 31 + int.from_bytes(data[i : i + 2], "little")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def encode_project_path(path: str) -> str:
    """Claude Code's folder name for a cwd: non-alphanumerics become ``-``; over 200 characters
    the name is cut to 200 and ``-<base36(abs(hash))>`` is appended (the hash is of the path).

    Non-ASCII characters count as one ``-`` per UTF-16 code unit, as in JavaScript.
    """
    units = path.encode("utf-16-le")
    chars = []
    for i in range(0, len(units), 2):
        code = int.from_bytes(units[i : i + 2], "little")
        ch = chr(code) if code < 0xD800 or code > 0xDFFF else "-"
        chars.append(ch if ch.isascii() and ch.isalnum() else "-")
    name = "".join(chars)
    if len(name) <= 200:
        return name
    return f"{name[:200]}-{_base36(abs(java_string_hash(path)))}"


def project_dir_for(config_dir: Path, cwd: Path) -> Path:
    """``<config_dir>/projects/<encode(realpath(cwd))>``."""
    return Path(config_dir) / "projects" / encode_project_path(os.path.realpath(cwd))


# ------------------------------------------------------------------------- isolated config


@dataclass
class ClaudeEnv:
    """One isolated Claude Code installation state: config dir, HOME, cwd and environment."""

    root: Path
    config_dir: Path
    home: Path
    cwd: Path
    base_url: str
    api_key: str = STANDIN_API_KEY
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def project_dir(self) -> Path:
        return project_dir_for(self.config_dir, self.cwd)

    @property
    def env(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": str(self.home),
            "USER": os.environ.get("USER", "tester"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "xterm-256color",
            "TMPDIR": str(self.root / "tmp"),
            "CLAUDE_CONFIG_DIR": str(self.config_dir),
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": self.api_key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
        env.update(self.extra_env)
        return env

    def session_path(self, session_id: str) -> Path:
        return self.project_dir / f"{session_id}.jsonl"

    def write_settings(self, settings: Mapping[str, Any]) -> None:
        _write_json(self.config_dir / "settings.json", settings)

    def global_state(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.config_dir / ".claude.json").read_text())
        return data

    def update_global_state(self, update: Mapping[str, Any]) -> None:
        state = self.global_state()
        state.update(update)
        _write_json(self.config_dir / ".claude.json", state)


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def make_claude_env(
    root: Path,
    base_url: str,
    *,
    cwd: Path | None = None,
    allow: Sequence[str] = DEFAULT_ALLOW,
    mcp_servers: Mapping[str, Mapping[str, Any]] | None = None,
    settings: Mapping[str, Any] | None = None,
    api_key: str = STANDIN_API_KEY,
) -> ClaudeEnv:
    """Lay out an isolated Claude Code state under ``root`` (which must exist).

    ``root/config`` is ``CLAUDE_CONFIG_DIR`` (``settings.json`` with ``permissions.allow``,
    ``.claude.json`` with onboarding done, the cwd trusted, the API key approved and the optional
    user-scope ``mcpServers``); ``root/home`` is HOME; ``cwd`` defaults to ``root/project``.
    """
    root = Path(root)
    config_dir, home = root / "config", root / "home"
    work = Path(cwd) if cwd is not None else root / "project"
    for d in (config_dir, home, work, root / "tmp"):
        d.mkdir(parents=True, exist_ok=True)
    real_cwd = os.path.realpath(work)
    state: dict[str, Any] = {
        "hasCompletedOnboarding": True,
        "numStartups": 1,
        "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []},
        "projects": {
            real_cwd: {
                "hasTrustDialogAccepted": True,
                "hasCompletedProjectOnboarding": True,
                "allowedTools": [],
            }
        },
    }
    if mcp_servers:
        state["mcpServers"] = {name: dict(conf) for name, conf in mcp_servers.items()}
    _write_json(config_dir / ".claude.json", state)
    merged: dict[str, Any] = {"permissions": {"allow": list(allow)}}
    merged.update(settings or {})
    _write_json(config_dir / "settings.json", merged)
    return ClaudeEnv(
        root=root,
        config_dir=config_dir,
        home=home,
        cwd=Path(real_cwd),
        base_url=base_url,
        api_key=api_key,
    )


@contextmanager
def isolated_claude_env(
    base_url: str,
    *,
    allow: Sequence[str] = DEFAULT_ALLOW,
    mcp_servers: Mapping[str, Mapping[str, Any]] | None = None,
    settings: Mapping[str, Any] | None = None,
    cwd_name: str = "project",
) -> Iterator[ClaudeEnv]:
    """A :func:`make_claude_env` in a fresh temporary directory, removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="kael-claude-"))
    try:
        yield make_claude_env(
            root,
            base_url,
            cwd=root / cwd_name,
            allow=allow,
            mcp_servers=mcp_servers,
            settings=settings,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def transcripts(env: ClaudeEnv) -> list[Path]:
    """The main-session transcripts in the env's project folder, oldest first."""
    folder = env.project_dir
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)


# ------------------------------------------------------------------------------ MCP readiness

#: The interactive Claude Code logs this to its MCP log once the server's connection result,
#: with the server's tools, is in its state (the tools of later requests): the channel gate that
#: runs right after that update says it either registered or skipped channel notifications.
MCP_TOOLS_TAKEN = "Channel notifications "
class ClaudePlace(Protocol):
    """Where a Claude Code runs: the home of its user and its working directory (a `ClaudeEnv`,
    or a household's user and workdir)."""

    @property
    def home(self) -> Path: ...

    @property
    def cwd(self) -> Path: ...


def mcp_log_dir(env: ClaudePlace, server: str) -> Path:
    """Where Claude Code writes its own log of the MCP server SERVER, one JSON-lines file per
    process: ``$HOME/.cache/claude-cli-nodejs/<enc(cwd)>/mcp-logs-<server>/``."""
    return (env.home / ".cache" / "claude-cli-nodejs" / encode_project_path(str(env.cwd))
            / f"mcp-logs-{server}")


def mcp_log_lines(env: ClaudePlace, server: str, session_id: str) -> list[str]:
    """The ``debug`` texts Claude Code logged for SERVER while running SESSION_ID, in order."""
    lines: list[str] = []
    folder = mcp_log_dir(env, server)
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        for raw in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(raw)
            except json.JSONDecodeError:
                continue  # a line being written
            if isinstance(record, dict) and record.get("sessionId") == session_id:
                lines.append(str(record.get("debug") or record.get("error") or ""))
    return lines


def wait_mcp_tools_taken(env: ClaudePlace, server: str, session_id: str,
                         timeout: float = 60) -> float:
    """Seconds until the interactive Claude Code running SESSION_ID has connected SERVER and
    taken its tools in, so that the next request announces them.

    Claude Code does not wait for MCP servers before a turn: a prompt typed earlier goes out
    without the server's tools. The bound is Claude Code's own connection timeout (30 s) plus
    room for one background retry of a slow server; the error shows Claude Code's MCP log.
    """
    started = time.monotonic()
    while True:
        lines = mcp_log_lines(env, server, session_id)
        if any(line.startswith(MCP_TOOLS_TAKEN) for line in lines):
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise TimeoutError(
                f"Claude Code did not take in the tools of the MCP server {server!r} within "
                f"{timeout:g} s of session {session_id} showing its prompt (no line starting "
                f"{MCP_TOOLS_TAKEN!r} in {mcp_log_dir(env, server)}); its log says:\n"
                + ("\n".join(lines[-20:]) or "(nothing)"))
        time.sleep(0.1)


# ---------------------------------------------------------------------------------- claude -p


@dataclass(frozen=True)
class PrintResult:
    returncode: int
    stdout: str
    stderr: str
    session_id: str | None
    transcript: Path | None


def run_print(
    env: ClaudeEnv,
    prompt: str | None,
    *,
    resume: str | None = None,
    args: Sequence[str] = (),
    stdin: str | None = None,
    timeout: float = 120,
    check: bool = True,
) -> PrintResult:
    """``claude -p [--resume ID] [args…] [prompt]`` in ``env.cwd``.

    ``prompt=None`` reads the prompt from ``stdin`` (e.g. with
    ``args=["--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]``).
    The session id is the resumed one, else the transcript that appeared in the project folder.
    """
    before = {p.name for p in transcripts(env)}
    cmd = [str(find_claude_binary()), "-p"]
    if resume:
        cmd += ["--resume", resume]
    cmd += list(args)
    if prompt is not None:
        cmd += ["--", prompt]
    proc = subprocess.run(
        cmd,
        cwd=env.cwd,
        env=env.env,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"claude -p exited {proc.returncode}\nstdout: {proc.stdout[-2000:]}\n"
            f"stderr: {proc.stderr[-2000:]}"
        )
    session_id = resume
    if session_id is None:
        new = [p for p in transcripts(env) if p.name not in before]
        session_id = new[-1].stem if new else None
    path = env.session_path(session_id) if session_id else None
    return PrintResult(
        proc.returncode,
        proc.stdout,
        proc.stderr,
        session_id,
        path if path is not None and path.exists() else None,
    )


STREAM_JSON_ARGS: tuple[str, ...] = (
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
)


def user_message_line(content: str | Sequence[Mapping[str, Any]]) -> str:
    """One ``--input-format stream-json`` input line carrying a user message."""
    body: Any = content if isinstance(content, str) else [dict(b) for b in content]
    line = {"type": "user", "message": {"role": "user", "content": body}}
    return json.dumps(line, ensure_ascii=False) + "\n"


def run_stream_turns(
    env: ClaudeEnv,
    contents: Sequence[str | Sequence[Mapping[str, Any]]],
    *,
    resume: str | None = None,
    args: Sequence[str] = (),
    timeout: float = 120,
) -> PrintResult:
    """Several turns in one ``claude -p`` process over stream-json.

    Each user message is written only after the previous turn's ``result`` event, so every
    message is its own turn (written together, Claude Code would queue and merge them).
    """
    before = {p.name for p in transcripts(env)}
    cmd = [str(find_claude_binary()), "-p", *STREAM_JSON_ARGS]
    if resume:
        cmd += ["--resume", resume]
    cmd += list(args)
    proc = subprocess.Popen(
        cmd,
        cwd=env.cwd,
        env=env.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    out: list[str] = []
    deadline = time.monotonic() + timeout
    session_id = resume
    try:
        assert proc.stdin is not None
        for content in contents:
            proc.stdin.write(user_message_line(content))
            proc.stdin.flush()
            while True:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
                if line is None:
                    raise RuntimeError("claude exited before answering:\n" + "".join(out[-20:]))
                out.append(line)
                event = json.loads(line) if line.startswith("{") else {}
                session_id = event.get("session_id") or session_id
                if event.get("type") == "result":
                    break
        proc.stdin.close()
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except (queue.Empty, subprocess.TimeoutExpired) as exc:
        raise TimeoutError(f"claude stream-json turns timed out:\n{''.join(out[-20:])}") from exc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
    stderr = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"claude -p (stream-json) exited {proc.returncode}: {stderr[-2000:]}")
    if session_id is None:
        new = [p for p in transcripts(env) if p.name not in before]
        session_id = new[-1].stem if new else None
    path = env.session_path(session_id) if session_id else None
    return PrintResult(
        proc.returncode,
        "".join(out),
        stderr,
        session_id,
        path if path is not None and path.exists() else None,
    )


# ---------------------------------------------------------------------------- interactive


class TmuxClaude:
    """The interactive binary in a detached tmux session on a private socket.

    Use as a context manager: the private tmux server is always killed on exit. Session names
    always contain ``DO-NOT-CREATE``; the socket is ``tmux -L kael-test-DO-NOT-CREATE-<random>``,
    so no live session of the machine can be addressed. The socket file is removed on exit.
    """

    def __init__(
        self,
        env: ClaudeEnv,
        args: Sequence[str] = (),
        *,
        width: int = 160,
        height: int = 50,
        command: Sequence[str] | None = None,
    ) -> None:
        """``command`` replaces the pane's command (default: the binary with ``args``)."""
        tag = uuid.uuid4().hex[:10]
        self.env = env
        self.args = list(args)
        self.command = list(command) if command is not None else None
        self.socket = f"kael-test-{_SESSION_MARK}-{tag}"
        self.session = f"{_SESSION_MARK}-kael-test-{tag}"
        tmux_dir = os.environ.get("TMUX_TMPDIR") or "/tmp"
        self._socket_path = Path(tmux_dir) / f"tmux-{os.getuid()}" / self.socket
        self.width, self.height = width, height
        self._started = False

    def _tmux(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        if "-t" in argv:
            target = argv[argv.index("-t") + 1]
            if _SESSION_MARK not in target:
                raise ValueError(f"refusing to address tmux target {target!r}")
        tmux_env = dict(self.env.env)
        tmux_env.pop("TMUX", None)
        if os.environ.get("TMUX_TMPDIR"):
            tmux_env["TMUX_TMPDIR"] = os.environ["TMUX_TMPDIR"]
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *argv],
            env=tmux_env,
            capture_output=True,
            text=True,
            timeout=30,
            check=check,
        )

    def start(self) -> TmuxClaude:
        cmd = self.command or [str(find_claude_binary()), *self.args]
        self._started = True
        try:
            self._tmux(
                "new-session",
                "-d",
                "-s",
                self.session,
                "-x",
                str(self.width),
                "-y",
                str(self.height),
                "-c",
                str(self.env.cwd),
                *cmd,
            )
            self._tmux("set-option", "-t", self.session, "remain-on-exit", "on")
            path = self._tmux("display-message", "-p", "-t", self.target, "#{socket_path}")
            self._socket_path = Path(path.stdout.strip() or self._socket_path)
        except BaseException:
            self.kill()
            raise
        return self

    def kill(self) -> None:
        """Kills the private tmux server (and Claude Code in it) and removes its socket file."""
        if self._started:
            self._tmux("kill-server", check=False)
            self._socket_path.unlink(missing_ok=True)
            self._started = False

    def __enter__(self) -> TmuxClaude:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()

    @property
    def socket_path(self) -> Path:
        return self._socket_path

    @property
    def target(self) -> str:
        return f"{self.session}:0.0"

    def send_keys(self, *keys: str) -> None:
        """tmux key names, e.g. ``"Enter"``, ``"Escape"``, ``"C-c"``."""
        self._tmux("send-keys", "-t", self.target, *keys)

    def type_text(self, text: str) -> None:
        """Types text literally (no key-name interpretation)."""
        self._tmux("send-keys", "-t", self.target, "-l", text)

    def submit(self, text: str, settle: float = 0.3) -> None:
        """Types a one-line prompt and presses Enter."""
        self.type_text(text)
        time.sleep(settle)
        self.send_keys("Enter")

    def capture(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.target).stdout

    def pane_dead(self) -> bool:
        out = self._tmux(
            "display-message", "-p", "-t", self.target, "#{pane_dead}", check=False
        ).stdout
        return out.strip() == "1"

    def wait_for(
        self, condition: str | Callable[[str], bool], timeout: float = 30, interval: float = 0.2
    ) -> str:
        """Polls the screen until it contains ``condition`` (or the predicate is true)."""
        check: Callable[[str], bool] = (
            condition if callable(condition) else (lambda screen: condition in screen)
        )
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.capture()
            if check(screen):
                return screen
            time.sleep(interval)
        raise TimeoutError(f"screen never matched {condition!r}; last screen:\n{screen}")
