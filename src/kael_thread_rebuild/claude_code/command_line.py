"""Claude Code's command line: its options, its program among other words, and which of its
arguments pick the session or are the prompt.

Stdlib only, Python 3.9+: the installer ships this module to the managed host (a copy in
`plugins/module_utils/kael_claude_code/`, see `role_utils`), where no kael-thread-rebuild
package is installed. The doctor imports it here, so what the installer writes is what the
doctor later accepts, by construction.
"""

from __future__ import annotations

import re
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
        option, variadic, index = _option_at(args, index, strict)
        options.append(option)
    return Parsed(options, prompt)


def _option_at(args: Sequence[str], index: int, strict: bool) -> tuple[Option, Option | None, int]:
    """The option ARGS[INDEX] with the value it takes; itself again when it takes further plain
    words (an unknown option, or one of many values), else None; and the index after it."""
    word = args[index]
    name, arity, inside = _option_name(word)
    option = Option(name, [index], inside)
    following = args[index + 1] if index + 1 < len(args) else None
    if inside is not None or arity == NONE:
        return option, None, index + 1
    if arity is None:
        if strict and following is not None and not _is_option(following):
            raise StartCommandError(
                f"{word} is not an option of Claude Code {VERSION}, so whether "
                f"{following!r} is its value or the prompt cannot be told; give the "
                "instance's resume_command explicitly")
        return option, option, index + 1
    if following is None or (arity == OPTIONAL and _is_option(following)):
        if arity != OPTIONAL and strict:
            raise StartCommandError(f"{word} is given without a value")
        return option, None, index + 1
    option.words.append(index + 1)
    return option, option if arity == MANY else None, index + 2


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


def show(groups: Iterable[FlagGroup]) -> str:
    return ", ".join(" ".join(group) for group in groups)
