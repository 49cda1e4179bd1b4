"""The inner loop of a payload scanner, written for mypyc: the UTF-8 bytes of every string of a
JSON line (escapes decoded, a lone surrogate as three bytes), each string's UTF-8 checked, -1
for a line that is not valid string content. Run as it is (interpreted) or compiled by mypyc;
`scan_kernel.pyx` is the same loop typed for Cython (`compare_compilers.py`)."""

from mypy_extensions import i64


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


def string_bytes(raw: bytes) -> i64:
    """See the module's docstring."""
    n: i64 = len(raw)
    i: i64 = 0
    total: i64 = 0
    while i < n:
        if raw[i] != 34:
            i += 1
            continue
        i += 1
        while True:
            if i >= n:
                return -1
            c: i64 = raw[i]
            if c == 34:
                i += 1
                break
            if c < 0x20:
                return -1
            if c < 0x80 and c != 92:
                total += 1
                i += 1
                continue
            if c >= 0x80:
                size: i64 = _utf8_length(raw, i, n)
                if size == 0:
                    return -1
                total += size
                i += size
                continue
            if i + 1 >= n:
                return -1
            escape: i64 = raw[i + 1]
            if escape != 117:
                if escape not in (34, 92, 47, 98, 102, 110, 114, 116):
                    return -1
                total += 1
                i += 2
                continue
            if i + 6 > n:
                return -1
            unit: i64 = _hex4(raw, i + 2)
            if unit < 0:
                return -1
            i += 6
            if 0xD800 <= unit <= 0xDBFF and i + 6 <= n and raw[i] == 92 and raw[i + 1] == 117:
                second: i64 = _hex4(raw, i + 2)
                if 0xDC00 <= second <= 0xDFFF:
                    total += 4
                    i += 6
                    continue
            total += 1 if unit < 0x80 else 2 if unit < 0x800 else 3
    return total
