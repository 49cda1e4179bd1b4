"""The spellings of a start command, turned into words: `systemctl show -p ExecStart`, a tmux
`#{pane_start_command}` and shell text (only its small grammar: words, quotes, expansions,
operators). Stdlib only, Python 3.9+ (shipped to the managed host like `command_line`).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .command_line import StartCommandError


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
    index = 0
    while index < len(text):
        if text[index] == " ":
            index += 1
            continue
        word, index = _tmux_word(text, index)
        words.append(word)
    return words


def _tmux_word(text: str, index: int) -> tuple[str, int]:
    """The tmux word starting at INDEX, and the index after it."""
    word: list[str] = []
    quote, length = "", len(text)
    while index < length and (quote or text[index] != " "):
        char = text[index]
        if quote and char == quote:
            quote = ""
        elif not quote and char in "'\"":
            quote = char
        elif char == "\\" and index + 1 < length:
            char, index = _vis_escape(text, index + 1)
            word.append(char)
        else:
            word.append(char)
        index += 1
    if quote:
        raise StartCommandError(f"unterminated {quote} quote in the tmux start command {text!r}")
    return "".join(word), index


def _vis_escape(text: str, index: int) -> tuple[str, int]:
    """The character a backslash escapes at INDEX (`\\n`, `\\033`), and the index of the
    escape's last character."""
    octal = re.match(r"[0-7]{3}", text[index:])
    if octal:
        return chr(int(octal.group(0), 8)), index + 2
    return _VIS_ESCAPES.get(text[index], text[index]), index


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


class _WordScan:
    """Reading one shell word: where it is, what it says so far, and what the shell does to it."""

    def __init__(self, text: str, start: int) -> None:
        self.text, self.start, self.index = text, start, start
        self.value: list[str] = []
        self.expands = self.splits = self.brace = False
        self.quote = ""

    def step(self) -> bool:
        """Read the character at `index` (or a command substitution); False at the word's end."""
        char = self.text[self.index]
        if self.quote != "'" and (char == "`" or self.text.startswith("$(", self.index)):
            end = _substitution_end(self.text, self.index)
            self.value.append(self.text[self.index:end])
            self.expands, self.splits = True, self.splits or not self.quote
            self.index = end
            return True
        if self.quote == "'":
            self._single_quoted(char)
        elif self.quote == '"':
            self._double_quoted(char)
        elif char in " \t" or _operator_at(self.text, self.index):
            return False
        else:
            self._unquoted(char)
        self.index += 1
        return True

    def _single_quoted(self, char: str) -> None:
        if char == "'":
            self.quote = ""
        else:
            self.value.append(char)

    def _double_quoted(self, char: str) -> None:
        following = self.text[self.index + 1:self.index + 2]
        if char == '"':
            self.quote = ""
        elif char == "\\" and following in _ESCAPED_IN_DOUBLE_QUOTES:
            self.value.append(following)
            self.index += 1
        else:
            self.expands = self.expands or char == "$"
            self.value.append(char)

    def _unquoted(self, char: str) -> None:
        if char in "'\"":
            self.quote = char
        elif char == "\\":
            self.value.append(self.text[self.index + 1:self.index + 2])
            self.index += 1
        else:
            self.brace = self.brace or char == "{"
            if char == "$" or char in _GLOB or (self.brace and (
                    char == "," or self.text.startswith("..", self.index))):
                self.expands = self.splits = True
            elif char == "~" and self.index == self.start:
                self.expands = True
            self.value.append(char)


def _word_at(text: str, start: int) -> Word:
    """The shell word starting at START (quotes, backslashes, expansions)."""
    scan = _WordScan(text, start)
    while scan.index < len(text) and scan.step():
        continue
    if scan.quote:
        raise StartCommandError(f"unterminated {scan.quote} quote in the shell command {text!r}")
    return Word("".join(scan.value), start, scan.index, scan.expands, scan.splits)


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
