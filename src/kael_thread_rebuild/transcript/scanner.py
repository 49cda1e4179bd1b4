"""The payload scanner: one pass over a line's bytes that finds its long string values and
measures them without decoding them, so that the reader parses only the rest (`skeleton`).

Written for mypyc (bytes, native `i64` integers, no dicts): compiled, it reads about as fast as
orjson parses; interpreted, about 40 times slower. The reader uses it when told to
(`KAEL_SCANNER=compiled`, see `reader.engine`), and by default only where it runs compiled
(`COMPILED`) once that pays (`reader.SCANNER_BY_DEFAULT`; benchmarks/README.md, "The payload
scanner"). It imports nothing of the package, so that it builds on its own.
"""

from importlib.machinery import EXTENSION_SUFFIXES
from typing import Final

from mypy_extensions import i64

#: Whether this module runs compiled (mypyc builds it into an extension module).
COMPILED: bool = __file__.endswith(tuple(EXTENSION_SUFFIXES))

# Final: mypyc puts them in the code (a plain global is looked up at every use).
_QUOTE: Final = 34
_BACKSLASH: Final = 92


def _hex4(raw: bytes, i: i64) -> i64:
    """The value of the four hex digits at I, -1 when they are not."""
    value: i64 = 0
    end: i64 = i + 4
    while i < end:
        c: i64 = raw[i]
        if 48 <= c <= 57:
            value = value * 16 + c - 48
        elif 97 <= c <= 102:
            value = value * 16 + c - 87
        elif 65 <= c <= 70:
            value = value * 16 + c - 55
        else:
            return -1
        i += 1
    return value


def _utf8_length(raw: bytes, i: i64, n: i64) -> i64:
    """The length of the UTF-8 sequence whose lead byte (at least 0x80) is at I, 0 when it is
    not one (overlong, a surrogate, past U+10FFFF, cut short)."""
    lead: i64 = raw[i]
    low: i64 = 0x80
    high: i64 = 0xBF
    size: i64 = 0
    if 0xC2 <= lead <= 0xDF:
        size = 2
    elif 0xE0 <= lead <= 0xEF:
        size = 3
        low = 0xA0 if lead == 0xE0 else 0x80
        high = 0x9F if lead == 0xED else 0xBF
    elif 0xF0 <= lead <= 0xF4:
        size = 4
        low = 0x90 if lead == 0xF0 else 0x80
        high = 0x8F if lead == 0xF4 else 0xBF
    else:
        return 0
    if i + size > n:
        return 0
    second: i64 = raw[i + 1]
    if second < low or second > high:
        return 0
    k: i64 = 2
    while k < size:
        follow: i64 = raw[i + k]
        if follow < 0x80 or follow > 0xBF:
            return 0
        k += 1
    return size


def _escaped_size(c: i64) -> i64:
    """The bytes `dumps_line` writes for the character C (below 0x80)."""
    if c in (_QUOTE, _BACKSLASH, 8, 9, 10, 12, 13):
        return 2
    if c < 0x20:
        return 6
    return 1


def _is_key(raw: bytes, i: i64, n: i64) -> bool:
    """Whether the string that ended just before I is an object's key."""
    while i < n:
        c: i64 = raw[i]
        if c != 32 and c != 9 and c != 10 and c != 13:
            return c == 58
        i += 1
    return False


def _unicode_escape(raw: bytes, i: i64, n: i64) -> tuple[i64, i64, i64]:
    """The `\\uXXXX` escape at I (a surrogate pair: both): where what follows it starts, and how
    much shorter it is decoded and written than in the line."""
    if i + 6 > n:
        raise ValueError("a string does not end")
    unit: i64 = _hex4(raw, i + 2)
    if unit < 0:
        raise ValueError("a bad escape")
    i += 6
    if unit < 0x80:
        return i, 5, 6 - _escaped_size(unit)
    if unit < 0x800:
        return i, 4, 4
    if unit < 0xD800 or unit > 0xDFFF:
        return i, 3, 3
    if unit <= 0xDBFF and i + 6 <= n and raw[i] == _BACKSLASH and raw[i + 1] == 117:
        low: i64 = _hex4(raw, i + 2)
        if 0xDC00 <= low <= 0xDFFF:  # twelve bytes, four decoded and written
            return i + 6, 8, 8
    return i, 3, 0  # a lone surrogate: three bytes decoded, written as its escape


def _escape(raw: bytes, i: i64, n: i64) -> tuple[i64, i64, i64]:
    """The escape whose backslash is at I: as `_unicode_escape`."""
    if i + 1 >= n:
        raise ValueError("a string does not end")
    escape: i64 = raw[i + 1]
    if escape == 117:
        return _unicode_escape(raw, i, n)
    if escape == 47:
        return i + 2, 1, 1
    if escape not in (_QUOTE, _BACKSLASH, 98, 102, 110, 114, 116):
        raise ValueError("a bad escape")
    return i + 2, 1, 0


def _string_body(raw: bytes, i: i64, n: i64) -> tuple[i64, i64, i64]:
    """The body of the string starting at I (after its quote): where its closing quote is, and
    how much shorter it is decoded (SHORTER) and written (UNWRITTEN) than in the line. Plain
    ASCII and UTF-8 are as many bytes in the line, decoded and written: only escapes count."""
    shorter: i64 = 0
    unwritten: i64 = 0
    while True:
        if i >= n:
            raise ValueError("a string does not end")
        c: i64 = raw[i]
        if c == _QUOTE:
            return i, shorter, unwritten
        if 0x20 <= c < 0x80 and c != _BACKSLASH:
            i += 1
        elif c >= 0x80:
            size: i64 = _utf8_length(raw, i, n)
            if size == 0:
                raise ValueError("not UTF-8")
            i += size
        elif c < 0x20:
            raise ValueError("a control character in a string")
        else:
            after, less, unwritten_here = _escape(raw, i, n)
            i = after
            shorter += less
            unwritten += unwritten_here


def long_strings(raw: bytes, least: i64) -> list[i64]:
    """Every string value of the line RAW whose body (between its quotes) is at least LEAST
    bytes, as four numbers each: where its body starts and ends in RAW, its UTF-8 bytes (escapes
    decoded, a lone surrogate as three bytes) and the bytes `dumps_line` writes for it (quotes
    included). Keys are left out. Raises ValueError when a string of the line is not what a
    JSON parse accepts (a control character, a bad escape, bad UTF-8, no closing quote);
    outside strings nothing is checked (the parse of the rest does that)."""
    found: list[i64] = []
    n: i64 = len(raw)
    i: i64 = 0
    while i < n:
        if raw[i] != _QUOTE:
            i += 1
            continue
        start: i64 = i + 1
        end, shorter, unwritten = _string_body(raw, start, n)
        i = end + 1
        if end - start >= least and not _is_key(raw, i, n):
            found.append(start)
            found.append(end)
            found.append(end - start - shorter)
            found.append(end - start + 2 - unwritten)
    return found
