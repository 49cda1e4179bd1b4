"""From a start command to the resume command that restarts Claude Code with the same flags.

A start command arrives in one of four spellings, each turned into an exact argv first:
- an argv (`/proc/<pid>/cmdline`, a D-Bus ExecStart, a runner's arguments);
- `systemctl show -p ExecStart` (`{ path=… ; argv[]=… ; … }`, arguments joined by one space);
- a tmux `#{pane_start_command}` (tmux's own escaping; one word means tmux ran it with a shell);
- shell text (the script of `bash -c`, `script -c`, `su -c`, or a one-word tmux command).
Inside shell text only a small grammar is understood: `cd DIR &&` prefixes, `exec`, variable
assignments and plain words. Anything else is refused with the construct named.

Stdlib only, Python 3.9+ (shipped to the managed host like `command_line`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from .command_line import (
    PLACEHOLDER,
    Derived,
    FlagGroup,
    NoClaude,
    StartCommandError,
    basename,
    classify,
    claude_arguments,
    derive_args,
    missing_flags,
    program_index,
    show,
)
from .spellings import Word, parse_exec_start, shell_words, split_tmux

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash"})
_SHELL_OPTIONS_WITH_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
# Programs that run a command string given as the value of -c/--command: (short options with a
# value, long options with a value).
_COMMAND_OPTION_WRAPPERS = {
    "script": ("cEBIOTmo", {"--command", "--echo", "--log-in", "--log-out", "--log-io",
                            "--log-timing", "--logging-format", "--output-limit"}),
    "su": ("csgGw", {"--command", "--session-command", "--shell", "--group",
                     "--supp-group", "--whitelist-environment"}),
    "runuser": ("csgGuw", {"--command", "--session-command", "--shell", "--group",
                           "--supp-group", "--user", "--whitelist-environment"}),
}
POINTER_RUNNERS = frozenset({"pointer_runner.sh"})


# -- from an argv or shell text to the resume command -----------------------------------------


class Resume(NamedTuple):
    argv: list[str]  # the resume command
    start_argv: list[str]  # the start command as an exact argv
    claude_args: list[str]  # the Claude Code arguments of the start command (the live ones)
    resume_args: list[str]  # the Claude Code arguments of the resume command
    wrappers: list[str]  # wrappers seen through, outermost first
    dropped: list[str]
    notes: list[str]
    expanding: tuple[str, ...] = ()  # Claude Code words a shell expands when it runs them


class _Inner(NamedTuple):
    edited: str
    claude_args: list[str]
    resume_args: list[str]
    wrappers: list[str]
    dropped: list[str]
    expanding: tuple[str, ...] = ()


def _shell_script_at(argv: Sequence[str], index: int) -> tuple[int, str] | None:
    """For a shell at ARGV[INDEX]: where its -c command string is (word index, prefix ''),
    or None when it runs no -c command (a script file or an interactive shell)."""
    has_c, word_index = False, index + 1
    while word_index < len(argv):
        word = argv[word_index]
        if word in ("--", "-"):
            word_index += 1
            break
        if word in _SHELL_OPTIONS_WITH_VALUE:
            word_index += 2
            continue
        if word.startswith("--"):
            word_index += 1
            continue
        if word[:1] in "-+" and len(word) > 1:
            has_c = has_c or (word[0] == "-" and "c" in word[1:])
            word_index += 2 if word[-1] in "oO" else 1
            continue
        break
    if not has_c:
        return None
    if word_index >= len(argv):
        raise StartCommandError(
            f"{basename(argv[index])} -c without a command string: {shlex.join(argv)}")
    return word_index, ""


def _option_command_at(argv: Sequence[str], index: int) -> tuple[int, str] | None:
    """For script/su/runuser at ARGV[INDEX]: where the value of -c/--command is (word index,
    the word's prefix before the value), or None."""
    short_with_value, long_with_value = _COMMAND_OPTION_WRAPPERS[basename(argv[index])]
    word_index = index + 1
    while word_index < len(argv):
        word = argv[word_index]
        if word == "--":
            return None
        if word.startswith("--"):
            found, word_index = _long_command_option(argv, word_index, long_with_value)
        elif word.startswith("-") and len(word) > 1:
            found, word_index = _short_command_option(argv, word_index, short_with_value)
        else:
            found, word_index = None, word_index + 1
        if found is not None:
            return found
    return None


if TYPE_CHECKING:  # a runtime alias with `|` would fail on the households' Python 3.9
    _Found = tuple[tuple[int, str] | None, int]  # pylint: disable=unsupported-binary-operation


def _long_command_option(argv: Sequence[str], word_index: int, with_value: set[str]) -> _Found:
    """For the long option ARGV[WORD_INDEX]: where the command string is when it is --command,
    and the index of the next word to read."""
    name, equals, _value = argv[word_index].partition("=")
    if name != "--command":
        return None, word_index + (1 if equals or name not in with_value else 2)
    if equals:
        return (word_index, name + "="), word_index
    return _command_after(argv, word_index)


def _short_command_option(argv: Sequence[str], word_index: int, with_value: str) -> _Found:
    """For the short options ARGV[WORD_INDEX] (`-qc`, `-cCMD`, `-s /bin/sh`): where the command
    string is when -c is among them, and the index of the next word to read."""
    word = argv[word_index]
    for position, letter in enumerate(word[1:], start=1):
        if letter not in with_value:
            continue
        rest = word[position + 1:]
        if letter != "c":
            return None, word_index + (1 if rest else 2)
        if rest:
            return (word_index, word[:position + 1]), word_index
        return _command_after(argv, word_index)
    return None, word_index + 1


def _command_after(argv: Sequence[str], word_index: int) -> _Found:
    """The command string as the word after WORD_INDEX; none, and the end, when it is last."""
    if word_index + 1 < len(argv):
        return (word_index + 1, ""), word_index + 1
    return None, len(argv)


def _wrapper_at(argv: Sequence[str], index: int) -> tuple[int, str] | None:
    name = basename(argv[index])
    if name in SHELLS:
        return _shell_script_at(argv, index)
    if name in _COMMAND_OPTION_WRAPPERS:
        return _option_command_at(argv, index)
    return None


def _refuse_npx(words: Sequence[str]) -> None:
    """npx runs Claude Code from its cache (`~/.npm/_npx/<hash>/…`), which it replaces or
    clears at will: a resume command must not name that path, nor depend on npx's lookup."""
    for word in words:
        if basename(word) == "npx" or "/_npx/" in word:
            raise StartCommandError(
                f"Claude Code runs through npx ({word}), from npx's cache, which npx replaces "
                "or clears at will; install it (npm install -g @anthropic-ai/claude-code, or "
                "its native installer) and start it from there, or give the instance's "
                "resume_command explicitly")


def _from_argv(argv: Sequence[str]) -> tuple[list[str], _Inner]:
    """The resume argv for an exact ARGV, seeing through wrappers."""
    _refuse_npx(argv)
    program = program_index(argv)
    for index in range(len(argv) if program is None else program):
        wrapper = _wrapper_at(argv, index)
        if wrapper is None:
            continue
        word_index, prefix = wrapper
        try:
            inner = _from_shell(argv[word_index][len(prefix):])
        except NoClaude:
            if program is not None:  # `bash -c 'exec "$0" "$@"' claude …`
                break
            raise
        out = list(argv)
        out[word_index] = prefix + inner.edited
        label = _wrapper_label(argv, index, word_index, prefix)
        return out, inner._replace(wrappers=[label, *inner.wrappers])
    if program is None:
        raise NoClaude("no word names Claude Code (claude, or a claude-code cli.js), and no "
                       "shell wrapper (bash -c, sh -c, script -c, su -c) holds it: "
                       + shlex.join(argv))
    args = list(argv[program + 1:])
    derived = derive_args(args)
    out = [*argv[:program + 1], *derived.args]
    return out, _Inner(shlex.join(out), args, derived.args, [], derived.dropped)


def _segments(tokens: Sequence[object], text: str) -> list[Word]:
    """The words of the last command of `cd DIR && … && COMMAND`; other operators refused."""
    segments: list[list[Word]] = [[]]
    for token in tokens:
        if isinstance(token, Word):
            segments[-1].append(token)
        elif token == "&&":
            segments.append([])
        else:
            shown = "a newline" if token == "\n" else repr(token)
            raise StartCommandError(
                f"the shell command uses {shown}, which this installer does not follow: "
                f"{text!r}; give the instance's resume_command explicitly")
    for segment in segments[:-1]:
        if len(segment) != 2 or segment[0].value != "cd":
            raise StartCommandError(
                "only `cd DIR &&` may come before the command, saw "
                f"{_span(text, segment) if segment else '&&'!r} in {text!r}")
    if not segments[-1]:
        raise StartCommandError(f"the shell command {text!r} runs nothing")
    return segments[-1]


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _span(text: str, words: Sequence[Word]) -> str:
    return text[words[0].start:words[-1].end]


def _is_assignment(word: Word, text: str) -> bool:
    return bool(_ASSIGNMENT.match(text[word.start:word.end]))


def _from_shell(text: str) -> _Inner:
    """The resume command for shell TEXT, edited in place so that every other byte of it
    (quoting, `$HOME`, `cd`, `exec`) stays as written."""
    words = _segments(shell_words(text), text)
    command = words[_command_start(words, text):]
    values = [word.value for word in command]
    _refuse_npx(values)
    program = program_index(values)
    if program is None:
        return _from_shell_wrapper(text, command)
    if command[program].expands:
        raise StartCommandError(f"the Claude Code program {_span(text, [command[program]])!r} "
                                f"is expanded by the shell in {text!r}")
    claude = command[program + 1:]
    for word in claude:
        if word.splits:
            raise StartCommandError(
                f"{_span(text, [word])!r} may expand to several words at run time, so the "
                "flags are only known from the live process; give the instance's "
                f"resume_command explicitly (in {text!r})")
    args = [word.value for word in claude]
    derived = derive_args(args)
    edited = _edited(text, claude, derived, command[program].end)
    expanding = tuple(_span(text, [word]) for word in claude if word.expands)
    return _Inner(edited, args, derived.args, [], derived.dropped, expanding)


def _command_start(words: Sequence[Word], text: str) -> int:
    """Where the command of WORDS starts: after `exec` and variable assignments."""
    head = 0
    if words[0].value == "exec":
        if len(words) > 1 and words[1].value.startswith("-"):
            raise StartCommandError(f"exec with options in {text!r}")
        head = 1
    while head < len(words) and _is_assignment(words[head], text):
        head += 1
    return head


def _from_shell_wrapper(text: str, command: Sequence[Word]) -> _Inner:
    """The resume command for shell TEXT whose COMMAND runs Claude Code through a wrapper that
    takes a command string (`bash -c '…'`); that string is edited and quoted again."""
    values = [word.value for word in command]
    for index in range(len(values)):
        wrapper = _wrapper_at(values, index)
        if wrapper is None:
            continue
        word_index, prefix = wrapper
        inner = _from_shell(values[word_index][len(prefix):])
        word = command[word_index]
        edited = text[:word.start] + shlex.quote(prefix + inner.edited) + text[word.end:]
        label = _wrapper_label(values, index, word_index, prefix)
        return inner._replace(edited=edited, wrappers=[label, *inner.wrappers])
    raise NoClaude(f"no word names Claude Code in the shell command {text!r}")


def _wrapper_label(words: Sequence[str], index: int, word_index: int, prefix: str) -> str:
    """How a wrapper seen through is named: its words up to the command string."""
    return (" ".join(words[index:word_index]) + (" " + prefix if prefix else "")).strip()


def _edited(text: str, claude: Sequence[Word], derived: Derived, program_end: int) -> str:
    """TEXT with the session flags and the prompt among the Claude Code words CLAUDE taken out
    (with the blanks before them), and `--resume {session_id}` put where DERIVED says."""
    found = classify([word.value for word in claude])
    gone = sorted({i for group in found.session for i in group} | set(found.prompt))
    edits: list[tuple[int, int, str]] = []
    for index in gone:
        start = claude[index].start
        while start > 0 and text[start - 1] in " \t":
            start -= 1
        edits.append((start, claude[index].end, ""))
    at = claude[derived.insert_at - 1].end if derived.insert_at else program_end
    edits.append((at, at, " --resume " + PLACEHOLDER))
    edited = text
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        edited = edited[:start] + replacement + edited[end:]
    return edited


def _plain_words(text: str) -> list[str] | None:
    """The words of TEXT when running them directly is the same as running TEXT with a shell
    (no operator, expansion, `exec` or assignment), else None."""
    tokens = shell_words(text)
    words = [t for t in tokens if isinstance(t, Word)]
    if words and words[0].value == "exec":  # `sh -c "exec X"` runs X as `X` alone would
        words = words[1:]
        tokens = tokens[1:]
    if not words or len(words) != len(tokens) or any(w.expands for w in words) or (
            words[0].value.startswith("-") or _is_assignment(words[0], text)):
        return None
    return [w.value for w in words]


def resume_from_argv(argv: Sequence[str]) -> Resume:
    if not argv:
        raise StartCommandError("the start command is empty")
    out, inner = _from_argv(argv)
    return Resume(out, list(argv), inner.claude_args, inner.resume_args, inner.wrappers,
                  inner.dropped, [], inner.expanding)


def resume_from_shell(text: str, shell: str = "/bin/sh") -> Resume:
    """For a command string that a shell runs (a one-word tmux start command): plain words
    become the argv; anything else keeps the shell, as `SHELL -c TEXT`."""
    inner = _from_shell(text)
    start, argv = _plain_words(text), _plain_words(inner.edited)
    if start is not None and argv is not None and not inner.wrappers:
        return Resume(argv, start, inner.claude_args, inner.resume_args, [], inner.dropped, [])
    return Resume([shell, "-c", inner.edited], [shell, "-c", text], inner.claude_args,
                  inner.resume_args, [f"{shell} -c", *inner.wrappers], inner.dropped, [],
                  inner.expanding)


def resume_from_tmux(text: str, shell: str = "/bin/sh") -> Resume:
    words = split_tmux(text)
    if not words:
        raise NoClaude("the tmux pane has no start command (it runs the default shell)")
    if len(words) == 1:
        return resume_from_shell(words[0], shell)
    return resume_from_argv(words)


_SYSTEMD_VARIABLE = re.compile(r"\$(\{[A-Za-z_]|[A-Za-z_])")


_SYSTEMD_PREFIXES = "@-:+!"


def unit_program(argv: Sequence[str]) -> list[str]:
    """ARGV as a unit file spells it, with systemd's prefixes on the program taken off
    (`-`, `:`, `+`, `!`, `!!`); with `@` the next word is only argv[0] and the program stays."""
    if not argv or argv[0][:1] not in _SYSTEMD_PREFIXES:
        return list(argv)
    program = argv[0].lstrip(_SYSTEMD_PREFIXES)
    return [program, *argv[2:]] if "@" in argv[0][:3] and len(argv) > 1 else [program, *argv[1:]]


def resume_from_unit_argv(argv: Sequence[str], notes: Sequence[str] = ()) -> Resume:
    """For a systemd unit's ExecStart argv (D-Bus or systemctl show, which start with the
    program's path; or a unit file's words): as `resume_from_argv`, refusing `$VAR` words that
    systemd itself expands at start."""
    argv = unit_program(argv)
    result = resume_from_argv(argv)
    if not result.wrappers:
        program = program_index(argv) or 0
        expanded = [w for w in argv[program:] if _SYSTEMD_VARIABLE.search(w)]
        if expanded:
            raise StartCommandError(
                f"the unit's command line uses {' '.join(expanded)}, which systemd expands at "
                "start, so the flags are only known from the live process: " + " ".join(argv))
    return result._replace(notes=[*notes, *result.notes])


def resume_from_exec_start(text: str) -> Resume:
    argv, notes = parse_exec_start(text)
    program = program_index(argv)
    for index in range(len(argv) if program is None else program):
        if basename(argv[index]) in _COMMAND_OPTION_WRAPPERS:
            raise StartCommandError(
                "systemctl show joins arguments with spaces, so the command string of "
                f"{basename(argv[index])} cannot be told from its other arguments: "
                f"{' '.join(argv)}; give the exact argv")
        wrapper = _wrapper_at(argv, index)
        if wrapper is not None:
            # The command string was split on its spaces; as the last argument it is the rest.
            word_index, _words = wrapper
            argv = [*argv[:word_index], " ".join(argv[word_index:])]
            notes.append("systemctl show joins arguments with spaces: the command string of "
                         f"{basename(argv[index])} was taken as the rest of the line")
            break
    return resume_from_unit_argv(argv, notes)


def resume_from_pointer_runner(argv: Sequence[str], claude: str = "claude") -> Resume:
    """The reference runner (`pointer_runner.sh POINTER [CLAUDE_ARG…]`) calls
    `claude -p --resume <id> CLAUDE_ARG… -- PROMPT`; the resume command spells that call."""
    index = next((i for i, w in enumerate(argv) if basename(w) in POINTER_RUNNERS), None)
    if index is None or index + 1 >= len(argv):
        runners = "|".join(sorted(POINTER_RUNNERS))
        raise StartCommandError(
            f"not a pointer runner command line ({runners} POINTER [ARG…]): {shlex.join(argv)}")
    args = list(argv[index + 2:])
    derived = derive_args(args)
    return Resume([claude, "-p", *derived.args], list(argv), args, derived.args,
                  [" ".join(argv[:index + 2])], derived.dropped, [])


def pointer_path(argv: Sequence[str]) -> str | None:
    index = next((i for i, w in enumerate(argv) if basename(w) in POINTER_RUNNERS), None)
    return argv[index + 1] if index is not None and index + 1 < len(argv) else None


def check_live(resume: Resume, live_argv: Sequence[str]) -> list[FlagGroup]:
    """Flags the live Claude Code process runs with that the resume command would lose. Raises
    StartCommandError when they differ because the start command has words a shell expands
    (`"$MODEL"`): what they hold is only known when it runs."""
    live = claude_arguments(live_argv)
    if live is None:
        raise StartCommandError(f"the live process is not Claude Code: {shlex.join(live_argv)}")
    missing = missing_flags(live, resume.resume_args)
    if missing and resume.expanding:
        raise StartCommandError(
            f"the start command has {', '.join(resume.expanding)}, which the shell expands when "
            f"it runs, so it cannot be checked against the live process's {show(missing)}; "
            "give the instance's resume_command explicitly, with the values spelled out")
    return missing
