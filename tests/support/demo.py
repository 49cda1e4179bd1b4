"""The local demo: rebuild a real Claude Code session and show what the new session's model sees.

Run with `.ci/demo` (after `.ci/setup`). It works in a temporary folder: a copy of a transcript
that the real Claude Code 2.1.328 wrote (tool calls, a channel speech tool, chat), its config,
then `dirty`, `plan` and `candidate` through the real command line, then the real Claude Code
resumes the candidate against a loopback stand-in API and the demo prints the request it sent.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from .claude_env import claude_available
from .fidelity import conversation_texts, non_text_block_types, resume_and_capture

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "claude-code-2.1.328"
SAMPLE = "long-tool-output"
PROMPT = "What have we talked about so far?"


def _cli(config: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "kael_thread_rebuild.interfaces.cli", "--config", str(config),
         *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"demo: {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def _title(text: str) -> None:
    print(f"\n== {text}")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="kael-demo-") as temp:
        root = Path(temp)
        project = root / "claude" / "projects" / "-demo-household"
        project.mkdir(parents=True)
        source = project / f"{SAMPLE}.jsonl"
        source.write_bytes((FIXTURES / f"{SAMPLE}.jsonl").read_bytes())
        out = root / "out"
        out.mkdir()
        config = root / "demo.toml"
        config.write_text(f'project_dir = "{project}"\nstate_dir = "{root / "state"}"\n')

        _title(f"a real Claude Code 2.1.328 session: {source.stat().st_size:,} bytes")
        _title("kael-thread-rebuild dirty")
        print(_cli(config, "dirty"), end="")
        _title("kael-thread-rebuild plan")
        print(_cli(config, "plan"), end="")
        _title("kael-thread-rebuild candidate --output-dir OUT")
        print(_cli(config, "candidate", "--output-dir", str(out)), end="")
        candidate = next(out.glob("*.jsonl"))
        print(f"candidate: {candidate.stat().st_size:,} bytes "
              f"(source: {source.stat().st_size:,} bytes, untouched)")

        if not claude_available():
            print("\n(the pinned Claude Code binary is missing: run .ci/setup to see the resume)")
            return 0
        _title(f"the real Claude Code resumes it: claude -p --resume {candidate.stem} …")
        bodies = resume_and_capture(candidate, candidate.stem, root / "work", PROMPT)
        for role, text in conversation_texts(bodies[0]):
            shown = text.replace("\n", " ")
            print(f"  {role:9} {shown[:100]}{'…' if len(shown) > 100 else ''}")
        runtime = non_text_block_types(bodies[0])
        print(f"runtime blocks sent to the model: {sorted(runtime) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
