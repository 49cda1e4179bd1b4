"""Claude Code's command line: find it in a start command, and derive the resume command.

One file for two users: the engine's doctor imports it (`kael_thread_rebuild.claude_cli`), and
the installer ships the very same file to the managed host as the module_utils
`kael_claude_cli` of `roles/kael` (a symlink to this file), where no kael-thread-rebuild package
is installed. So it uses the standard library only and runs on Python 3.9+; keep it that way.
What the installer writes is then what the doctor later accepts, by construction.

A start command arrives in one of four spellings, each turned into an exact argv first:
- an argv (`/proc/<pid>/cmdline`, a D-Bus ExecStart, a runner's arguments);
- `systemctl show -p ExecStart` (`{ path=… ; argv[]=… ; … }`, arguments joined by one space);
- a tmux `#{pane_start_command}` (tmux's own escaping; one word means tmux ran it with a shell);
- shell text (the script of `bash -c`, `script -c`, `su -c`, or a one-word tmux command).
Inside shell text only a small grammar is understood: `cd DIR &&` prefixes, `exec`, variable
assignments and plain words. Anything else is refused with the construct named.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple

PLACEHOLDER = "{session_id}"
#: The Claude Code whose command line this file knows.
VERSION = "2.1.328"

# Every option of Claude Code 2.1.328's main command as commander declares it: those `claude
# --help` lists and the hidden ones the binary accepts (each probed: no "unknown option").
# commander's arity: `<v>` takes the next word whatever it is, `[v]` the next word unless it is
# an option, `<v...>` the next word and every further one up to an option, none a flag.
OPTION_SPECS = (
    "--add-dir <directories...>", "--advisor <model>", "--agent <agent>", "--agent-color <color>",
    "--agent-id <id>", "--agent-name <name>", "--agent-type <type>", "--agents <json-or-file>",
    "--agents-view-if-allowed", "--allow-dangerously-skip-permissions", "--allow-other-models",
    "--allowedTools, --allowed-tools <tools...>", "--append-subagent-system-prompt <prompt>",
    "--append-subagent-system-prompt-file <file>", "--append-system-prompt <prompt>",
    "--append-system-prompt-file <file>", "--attach-serve <session_id>",
    "--autocompact <auto|tokens>", "--await-claim", "--await-initialize", "--ax-screen-reader",
    "--bare", "--betas <betas...>", "--bg, --background", "--brief", "-c, --continue",
    "--channels <servers...>", "--chrome", "--client-data-url <url>",
    "--cloud [description|session_id|url]", "--correlation-id <id>", "-d, --debug [filter]",
    "-d2e, --debug-to-stderr", "--dangerously-load-development-channels <servers...>",
    "--dangerously-skip-permissions", "--debug-file <path>", "--deep-link-cwd-b64 <b64>",
    "--deep-link-last-fetch <ms>", "--deep-link-origin", "--deep-link-repo <slug>", "--desktop",
    "--disable-slash-commands", "--disallowedTools, --disallowed-tools <tools...>",
    "--effort <level>", "--enable-auth-status", "--enable-auto-mode",
    "--environment <environment_id>", "--exclude-dynamic-system-prompt-sections",
    "--fallback-model <model>", "--fast-mode <on|off>", "--file <specs...>", "--fork-session",
    "--forward-home-settings <true|false>", "--forward-subagent-text", "--from-pr [value]",
    "-h, --help", "--hold-repository-while-parked", "--host-auth-is-org-sign-in", "--ide",
    "--include-hook-events", "--include-partial-messages", "--include-unsupported-models",
    "--inherit-permission-mode <mode>", "--init", "--init-only", "--initialize-fields <names>",
    "--input-format <format>", "--json-schema <schema>", "--lead-verify-key <time.key>",
    "--maintenance", "--managed-settings <json>", "--managed-settings-in-initialize",
    "--max-budget-usd <amount>", "--max-thinking-tokens <tokens>", "--max-turns <turns>",
    "--mcp-config <configs...>", "--messaging-socket-path <path>", "--metadata <key=value>",
    "--model <model>", "-n, --name <name>", "--no-chrome", "--no-session-persistence",
    "--on-branch <branch>", "--output-format <format>", "-p, --print", "--parent-session-id <id>",
    "--permission-mode <mode>", "--permission-prompt-tool <tool>",
    "--permission-prompts <target>", "--plan-mode-instructions <instructions>",
    "--plan-mode-required", "--plugin-dir <path>", "--plugin-dir-no-mcp <path>",
    "--plugin-url <url>", "--pool <pool_id>", "--prefill <text>", "--prefill-b64 <b64>",
    "--proactivity <level>", "--project-config-root <dir>", "--prompt-suggestions [value]",
    "-r, --resume [value]", "--rc [name]", "--ref <ref>", "--remote [description|session_id|url]",
    "--remote-control [name]", "--remote-control-session-name-prefix <prefix>",
    "--replay-user-messages", "--reply-on-resume", "--restricted",
    "--resume-drops-turn <message id>", "--resume-session-at <message id>",
    "--rewind-files <user-message-id>", "--runner-declares <names>", "--safe-mode",
    "--sdk-url <url>", "--session-began-as-copy <value>", "--session-id <uuid>",
    "--session-mirror", "--setting-sources <sources>", "--settings <file-or-json>",
    "--strict-mcp-config", "--system-prompt <prompt>", "--system-prompt-file <file>",
    "--system-prompt-snapshot <on|off>", "--task-budget <tokens>", "--team-name <name>",
    "--teammate-mode <mode>", "--teleport [session]", "--thinking <mode>",
    "--thinking-display <display>", "--tmux", "--tools <tools...>", "-v, --version", "--verbose",
    "-w, --worktree [name]", "--watch-artifact <artifact>",
    "--watch-artifact-no-autoreact <artifact>", "--workload <tag>",
)
NONE, ONE, OPTIONAL, MANY = "none", "one", "optional", "many"


def _arity(spec: str) -> str:
    value = spec.partition(" <")[2] or spec.partition(" [")[2]
    if not value:
        return NONE
    if value.endswith("...>") or value.endswith("...]"):
        return MANY
    return ONE if "<" in spec else OPTIONAL


def _names(spec: str) -> list[str]:
    return [name.strip() for name in re.split(r" [<\[]", spec)[0].split(",")]


#: Each option's arity, by its canonical name (the last spelling of its spec).
ARITY = {_names(spec)[-1]: _arity(spec) for spec in OPTION_SPECS}
#: Other spellings of an option (`-c`, `--allowedTools`, `--bg`) to its canonical name.
ALIASES = {alias: _names(spec)[-1] for spec in OPTION_SPECS for alias in _names(spec)[:-1]}
#: Flags that pick the session: the resume command replaces them with its own.
SESSION_FLAGS = frozenset({"--continue", "--resume", "--session-id", "--fork-session"})
#: Words before the program that take the next word as a user or group (`sudo -u claude claude`).
_USER_OPTIONS = frozenset({"-u", "--user", "-g", "--group", "-U"})

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

FlagGroup = tuple[str, ...]


class StartCommandError(ValueError):
    """The start command cannot be understood; the message names what was seen."""


class NoClaude(StartCommandError):
    """No word of the command names Claude Code."""


def basename(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]


def is_claude_program(word: str) -> bool:
    name = basename(word)
    return name in ("claude", "claude.exe") or (
        name in ("cli.js", "cli.mjs") and "claude-code" in word)


def claude_arguments(argv: Sequence[str]) -> list[str] | None:
    """The words after the Claude Code program in ARGV (which may start with an interpreter,
    `env` or a wrapper); None when no word names Claude Code."""
    index = program_index(argv)
    return None if index is None else list(argv[index + 1:])


def program_index(argv: Sequence[str]) -> int | None:
    """Where the Claude Code program is in ARGV; a `claude` that is the value of a user or group
    option (`sudo -u claude …`) is not it."""
    for index, word in enumerate(argv):
        if is_claude_program(word) and not (index and argv[index - 1] in _USER_OPTIONS):
            return index
    return None


#: Programs that run a script named by their first operand (a shebang line's interpreter).
INTERPRETERS = frozenset({"node", "nodejs", "bun", "deno", "bash", "sh", "dash", "zsh"})


def is_claude_process(argv: Sequence[str]) -> bool:
    """Whether ARGV is Claude Code's own process: its program is Claude Code, directly or run by
    an interpreter. A wrapper that names it further on (tmux, timeout, sudo) is not."""
    index = program_index(argv)
    return index is not None and (index == 0 or (
        basename(argv[0]) in INTERPRETERS and all(w.startswith("-") for w in argv[1:index])))


def missing_flags(live_args: Sequence[str], kept_args: Sequence[str]) -> list[FlagGroup]:
    """Options of LIVE_ARGS (the words after the program) that KEPT_ARGS does not carry, as a
    multiset: an option given twice must be kept twice."""
    kept = Counter(flag_groups(kept_args))
    missing = []
    for group in flag_groups(live_args):
        if kept[group] > 0:
            kept[group] -= 1
        else:
            missing.append(group)
    return missing


# -- Claude Code's project folder ------------------------------------------------------------

_ALNUM = re.compile(r"[a-zA-Z0-9]")


def _java_hash(text: str) -> int:
    data = text.encode("utf-16-le", "surrogatepass")
    value = 0
    for index in range(0, len(data), 2):
        value = (value * 31 + (data[index] | data[index + 1] << 8)) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _base36(number: int) -> str:
    digits, out = "0123456789abcdefghijklmnopqrstuvwxyz", ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if number == 0:
            return out


def encode_project_dir(workdir: str) -> str:
    """Claude Code's folder name under `<config dir>/projects/` for a physical working dir.
    JavaScript strings are UTF-16: a character outside the BMP (an emoji) is two code units, so
    it becomes two dashes, and the limit of 200 counts code units."""
    name = "".join(char if _ALNUM.fullmatch(char) else "-" * (1 + (ord(char) > 0xFFFF))
                   for char in workdir)
    if len(name) <= 200:
        return name
    return f"{name[:200]}-{_base36(abs(_java_hash(workdir)))}"


# -- which words of the Claude Code arguments pick the session, and which are a prompt ---------


class Option(NamedTuple):
    name: str  # canonical (`-c` is `--continue`); a short cluster such as `-pv` as written
    words: list[int]  # indices of the option's word and of its values
    inside: str | None  # a value given in the option's own word (`--model=opus`, `-dhooks`)


class Parsed(NamedTuple):
    options: list[Option]
    prompt: list[int]  # indices of prompt words (and of a `--` before them)


def _is_option(word: str) -> bool:
    return len(word) > 1 and word.startswith("-")


def _option_name(word: str) -> tuple[str, str | None, str | None]:
    """(canonical name, arity or None when unknown, the value inside the word)."""
    if word.startswith("--"):
        name, equals, value = word.partition("=")
        name = ALIASES.get(name, name)
        return name, ARITY.get(name), value if equals else None
    if word in ALIASES:
        return ALIASES[word], ARITY[ALIASES[word]], None
    first = ALIASES.get(word[:2])
    if len(word) > 2 and first is not None and ARITY[first] != NONE:
        return first, ARITY[first], word[2:]  # `-dhooks`: commander reads the rest as the value
    return word, (NONE if len(word) > 2 else None), None  # a cluster of flags, or unknown


def parse_args(args: Sequence[str], strict: bool = True) -> Parsed:
    """The options of ARGS (the words after the program) with the words each one takes, read
    the way Claude Code's commander reads them; the rest is the prompt. STRICT refuses what
    cannot be read for sure (an unknown option before a plain word, a value missing);
    otherwise an unknown option takes the plain words after it."""
    options: list[Option] = []
    prompt: list[int] = []
    variadic: Option | None = None  # the option that takes further plain words
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            prompt.extend(range(index, len(args)))
            break
        if not _is_option(word):
            (prompt if variadic is None else variadic.words).append(index)
            index += 1
            continue
        name, arity, inside = _option_name(word)
        option, variadic = Option(name, [index], inside), None
        options.append(option)
        following = args[index + 1] if index + 1 < len(args) else None
        index += 1
        if inside is not None or arity == NONE:
            continue
        if arity is None:
            if strict and following is not None and not _is_option(following):
                raise StartCommandError(
                    f"{word} is not an option of Claude Code {VERSION}, so whether "
                    f"{following!r} is its value or the prompt cannot be told; give the "
                    "instance's resume_command explicitly")
            variadic = option
        elif following is None or (arity == OPTIONAL and _is_option(following)):
            if arity != OPTIONAL and strict:
                raise StartCommandError(f"{word} is given without a value")
        else:
            option.words.append(index)
            index += 1
            variadic = option if arity == MANY else None
    return Parsed(options, prompt)


def flag_groups(words: Sequence[str]) -> list[FlagGroup]:
    """Each option with its values, spelled canonically; session flags and the prompt (words
    that belong to no option, and everything after `--`) are left out."""
    return [(option.name, *([] if option.inside is None else [option.inside]),
             *(words[i] for i in option.words[1:]))
            for option in parse_args(words, strict=False).options
            if option.name not in SESSION_FLAGS]


def prompt_words(args: Sequence[str]) -> list[str]:
    """The words of ARGS that Claude Code takes as the prompt (sent as the first message)."""
    return [args[i] for i in parse_args(args, strict=False).prompt if args[i] != "--"]


class Classified(NamedTuple):
    session: list[list[int]]  # index groups of session flags, in order
    prompt: list[int]  # indices of prompt words (and a `--` before them)


def classify(args: Sequence[str]) -> Classified:
    """Session-flag groups and prompt words among ARGS (the words after the program)."""
    for word in args:
        if word == "--":
            break
        if _is_option(word) and not word.startswith("--") and word not in ALIASES and (
                set(word[1:]) & {"c", "r"}):
            raise StartCommandError(
                f"the option cluster {word!r} may hold -c or -r; spell --continue or --resume out")
    parsed = parse_args(args)
    return Classified([o.words for o in parsed.options if o.name in SESSION_FLAGS],
                      parsed.prompt)


class Derived(NamedTuple):
    args: list[str]  # the resume command's words after the program
    dropped: list[str]  # words left out (session flags and an initial prompt)
    insert_at: int  # where `--resume {session_id}` went among ARGS of the start command


def derive_args(args: Sequence[str]) -> Derived:
    """The Claude Code arguments of the resume command: ARGS with every session flag replaced
    by one `--resume {session_id}` (where the first one stood, else first) and the prompt
    left out; every other word is kept as it is."""
    found = classify(args)
    gone = {i for group in found.session for i in group} | set(found.prompt)
    insert_at = found.session[0][0] if found.session else 0
    out: list[str] = []
    for index, word in enumerate(args):
        if index == insert_at:
            out += ["--resume", PLACEHOLDER]
        if index not in gone:
            out.append(word)
    if insert_at >= len(args):
        out += ["--resume", PLACEHOLDER]
    return Derived(out, [args[i] for i in sorted(gone)], insert_at)


# -- spellings of a start command -------------------------------------------------------------


def parse_exec_start(text: str) -> tuple[list[str], list[str]]:
    """(argv, notes) from `systemctl show -p ExecStart` output or just its value.

    systemctl joins the arguments with single spaces and no quoting, so they are split on single
    spaces; an argument that held a space cannot be told apart (the live cross-check catches
    that). `$VAR` words are expanded by systemd at start and cannot be known from here."""
    value = text.strip()
    if value.startswith("ExecStart"):
        value = value.partition("=")[2].strip()
    entries = re.findall(r"\{ path=.*? \}", value)
    if not entries:
        raise StartCommandError(f"not an ExecStart value ({{ path=… ; argv[]=… ; … }}): {text!r}")
    if len(entries) > 1:
        raise StartCommandError(
            f"the unit has {len(entries)} ExecStart commands; expected one: {text!r}")
    match = re.match(r"\{ path=(.*?) ; argv\[\]=(.*?) ; (?:ignore_errors|flags)=", entries[0])
    if not match:
        raise StartCommandError(f"cannot find path= and argv[]= in {entries[0]!r}")
    path, joined = match.group(1), match.group(2)
    argv = joined.split(" ")
    notes = []
    if any(word == "" for word in argv):
        notes.append("systemctl show printed runs of spaces: some arguments held spaces")
    if argv[0] != path:  # `@path name …`: the program is path, argv[0] is only a name
        notes.append(f"argv[0] {argv[0]!r} is not the unit's program {path!r}, which is kept")
        argv[0] = path
    return argv, notes


_VIS_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                "s": " ", "0": "\0"}


def split_tmux(text: str) -> list[str]:
    """The words of a tmux `#{pane_start_command}` (tmux's args_escape: words quoted with '…'
    or "…" and vis(3) C-style escapes inside and outside quotes)."""
    words: list[str] = []
    index, length = 0, len(text)
    while index < length:
        while index < length and text[index] == " ":
            index += 1
        if index >= length:
            break
        word, quote = [], ""
        while index < length and (quote or text[index] != " "):
            char = text[index]
            if quote and char == quote:
                quote = ""
            elif not quote and char in "'\"":
                quote = char
            elif char == "\\" and index + 1 < length:
                index += 1
                octal = re.match(r"[0-7]{3}", text[index:])
                if octal:
                    word.append(chr(int(octal.group(0), 8)))
                    index += 2
                else:
                    word.append(_VIS_ESCAPES.get(text[index], text[index]))
            else:
                word.append(char)
            index += 1
        if quote:
            raise StartCommandError(
                f"unterminated {quote} quote in the tmux start command {text!r}")
        words.append("".join(word))
    return words


class Word(NamedTuple):
    value: str  # after quote removal
    start: int  # span in the text
    end: int
    expands: bool  # $, ~ or globbing: the shell changes it at run time
    splits: bool  # an unquoted expansion, glob or brace list: may turn into several words


_OPERATORS = ("&&", "||", ";;", ">>", "<<", "&", "|", ";", "<", ">", "(", ")", "\n")
_GLOB = frozenset("*?[")
_ESCAPED_IN_DOUBLE_QUOTES = frozenset('"\\$`')


def _operator_at(text: str, index: int) -> str | None:
    return next((op for op in _OPERATORS if text.startswith(op, index)), None)


def _substitution_end(text: str, index: int) -> int:
    """The end of the command substitution `$(…)` or `…` at INDEX (kept as written)."""
    if text[index] == "`":
        end = text.find("`", index + 1)
    else:
        depth, end = 0, index + 1
        while end < len(text):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                break
            end += 1
        end = end if end < len(text) else -1
    if end < 0:
        raise StartCommandError(f"unterminated command substitution in the shell command {text!r}")
    return end + 1


def _word_at(text: str, start: int) -> Word:
    """The shell word starting at START (quotes, backslashes, expansions)."""
    value: list[str] = []
    expands = splits = brace = False
    quote, index = "", start
    while index < len(text):
        char = text[index]
        if quote != "'" and (char == "`" or text.startswith("$(", index)):
            end = _substitution_end(text, index)
            value.append(text[index:end])
            expands, splits = True, splits or not quote
            index = end
            continue
        if quote == "'":
            if char == "'":
                quote = ""
            else:
                value.append(char)
        elif quote == '"':
            following = text[index + 1:index + 2]
            if char == '"':
                quote = ""
            elif char == "\\" and following in _ESCAPED_IN_DOUBLE_QUOTES:
                value.append(following)
                index += 1
            else:
                expands = expands or char == "$"
                value.append(char)
        elif char in " \t" or _operator_at(text, index):
            break
        elif char in "'\"":
            quote = char
        elif char == "\\":
            value.append(text[index + 1:index + 2])
            index += 1
        else:
            brace = brace or char == "{"
            if char == "$" or char in _GLOB or (brace and (char == "," or
                                                           text.startswith("..", index))):
                expands = splits = True
            elif char == "~" and index == start:
                expands = True
            value.append(char)
        index += 1
    if quote:
        raise StartCommandError(f"unterminated {quote} quote in the shell command {text!r}")
    return Word("".join(value), start, index, expands, splits)


def shell_words(text: str) -> list[object]:
    """Words (`Word`) and operators (`str`) of shell TEXT; refuses comments and unterminated
    quotes."""
    tokens: list[object] = []
    index = 0
    while index < len(text):
        if text[index] in " \t":
            index += 1
            continue
        operator = _operator_at(text, index)
        if operator:
            tokens.append(operator)
            index += len(operator)
        elif text[index] == "#":
            raise StartCommandError(f"a comment in the shell command {text!r}")
        else:
            word = _word_at(text, index)
            tokens.append(word)
            index = word.end
    return tokens


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
            name, equals, _ = word.partition("=")
            if name == "--command":
                if equals:
                    return word_index, name + "="
                return (word_index + 1, "") if word_index + 1 < len(argv) else None
            word_index += 1 if equals or name not in long_with_value else 2
            continue
        if word.startswith("-") and len(word) > 1:
            for position, letter in enumerate(word[1:], start=1):
                if letter not in short_with_value:
                    continue
                rest = word[position + 1:]
                if letter == "c":
                    if rest:
                        return word_index, word[:position + 1]
                    return (word_index + 1, "") if word_index + 1 < len(argv) else None
                word_index += 0 if rest else 1
                break
            word_index += 1
            continue
        word_index += 1
    return None


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
        label = " ".join(argv[index:word_index]) + (" " + prefix if prefix else "")
        return out, inner._replace(wrappers=[label.strip(), *inner.wrappers])
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
    head = 0
    if words[0].value == "exec":
        if len(words) > 1 and words[1].value.startswith("-"):
            raise StartCommandError(f"exec with options in {text!r}")
        head = 1
    while head < len(words) and _is_assignment(words[head], text):
        head += 1
    command = words[head:]
    values = [word.value for word in command]
    _refuse_npx(values)
    program = program_index(values)
    if program is None:
        for index in range(len(values)):
            wrapper = _wrapper_at(values, index)
            if wrapper is None:
                continue
            word_index, prefix = wrapper
            inner = _from_shell(values[word_index][len(prefix):])
            word = command[word_index]
            edited = text[:word.start] + shlex.quote(prefix + inner.edited) + text[word.end:]
            label = " ".join(values[index:word_index]) + (" " + prefix if prefix else "")
            return inner._replace(edited=edited, wrappers=[label.strip(), *inner.wrappers])
        raise NoClaude(f"no word names Claude Code in the shell command {text!r}")
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
    found = classify(args)
    gone = sorted({i for group in found.session for i in group} | set(found.prompt))
    edits: list[tuple[int, int, str]] = []
    for index in gone:
        # Remove the word with the blanks before it.
        start = claude[index].start
        while start > 0 and text[start - 1] in " \t":
            start -= 1
        edits.append((start, claude[index].end, ""))
    resume = " --resume " + PLACEHOLDER
    at = claude[derived.insert_at - 1].end if derived.insert_at else command[program].end
    edits.append((at, at, resume))
    edited = text
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        edited = edited[:start] + replacement + edited[end:]
    expanding = tuple(_span(text, [word]) for word in claude if word.expands)
    return _Inner(edited, args, derived.args, [], derived.dropped, expanding)


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
            word_index, _ = wrapper
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


def show(groups: Iterable[FlagGroup]) -> str:
    return ", ".join(" ".join(group) for group in groups)


# -- the engine's Stop hook among Claude Code's hooks ------------------------------------------

HOOK_STOP = "hook-stop"
#: The appliance's Stop hook wrapper on the host (image/kael-hook): docker exec … hook-stop.
HOOK_WRAPPER = "kael-hook"


def _hook_words(command: str) -> list[str]:
    """The words of a hook command, and those of a command string among them (`sh -c '…'`)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return [*words, *(inner for word in words if " " in word for inner in _hook_words(word))]


def runs_hook_stop(command: str) -> bool:
    """Whether a hook command feeds the engine's hook-stop: directly, through `docker exec`, or
    through the appliance's wrapper `kael-hook`. The installer and doctor both use this."""
    return any(word == HOOK_STOP or basename(word) == HOOK_WRAPPER
               for word in _hook_words(command))


def hook_option(command: str, name: str) -> str | None:
    """The value of option NAME (`--config`) in a hook command."""
    words = _hook_words(command)
    for index, word in enumerate(words):
        if word == name and index + 1 < len(words):
            return words[index + 1]
        if word.startswith(name + "="):
            return word.partition("=")[2]
    return None


def same_hook(command: str, ours: str) -> bool:
    """Whether hook COMMAND is OURS, or an earlier spelling of it: both feed hook-stop with the
    same --config (one instance's config file), whatever else changed (container, paths)."""
    if command == ours:
        return True
    config = hook_option(ours, "--config")
    return (config is not None and runs_hook_stop(command) and runs_hook_stop(ours)
            and hook_option(command, "--config") == config)


# -- what the installer writes for Claude Code (and `claude-pieces` prints for a household) ----

#: The MCP server's name in Claude Code's registration and in the permission rules.
MCP_SERVER = "kael-thread-rebuild"
#: The Stop hook's timeout in seconds (the role's kael_hook_timeout defaults to it).
HOOK_TIMEOUT = 10


def permission(server: str, tool: str) -> str:
    return f"mcp__{server}__{tool}"


def stop_hook_entry(command: str, timeout: int) -> dict[str, object]:
    """Our entry in `hooks.Stop[].hooks` of settings.json."""
    return {"type": "command", "command": command, "timeout": timeout}


def mcp_add_argv(claude: str, server: str, command: Sequence[str]) -> list[str]:
    """The `claude mcp add` that registers COMMAND as the user's MCP server SERVER."""
    return [claude, "mcp", "add", "--scope", "user", server, "--", *command]
