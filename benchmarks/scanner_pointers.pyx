# cython: language_level=3, boundscheck=False, wraparound=False
"""The payload scanner's pass written with C pointers (a second source, kept only for this
measurement): `transcript/scanner.py`'s `long_strings` with the same rules (UTF-8 and escapes
checked, every string measured, keys left out) over a `const unsigned char*` and a class per
byte. compare_compilers.py checks its sizes as it checks the scanner's builds: it is what a
checked pass over every byte costs at best, where `byte_loop_bound.pyx` checks nothing."""

from libc.string cimport memchr

cdef unsigned char PLAIN = 0, QUOTE = 1, BACKSLASH = 2, CONTROL = 3, HIGH = 4
cdef unsigned char CLASS[256]
# Per lead byte of a UTF-8 sequence: its length (0: not a lead byte) and the range its second
# byte must be in (no overlong form, no encoded surrogate, nothing past U+10FFFF).
cdef unsigned char SEQUENCE[256]
cdef unsigned char SECOND_LOW[256]
cdef unsigned char SECOND_HIGH[256]
cdef unsigned char HEX[256]  # a hex digit's value, 255 for any other byte
for _byte in range(256):
    CLASS[_byte] = (QUOTE if _byte == 34 else BACKSLASH if _byte == 92 else
                    CONTROL if _byte < 0x20 else PLAIN if _byte < 0x80 else HIGH)
    SEQUENCE[_byte] = (2 if 0xC2 <= _byte <= 0xDF else 3 if 0xE0 <= _byte <= 0xEF else
                       4 if 0xF0 <= _byte <= 0xF4 else 0)
    SECOND_LOW[_byte] = 0xA0 if _byte == 0xE0 else 0x90 if _byte == 0xF0 else 0x80
    SECOND_HIGH[_byte] = 0x9F if _byte == 0xED else 0x8F if _byte == 0xF4 else 0xBF
    HEX[_byte] = int(chr(_byte), 16) if chr(_byte) in "0123456789abcdefABCDEF" else 255


cdef long long _hex4(const unsigned char* p, Py_ssize_t i):
    cdef long long value = 0
    cdef unsigned char digit
    for i in range(i, i + 4):
        digit = HEX[p[i]]
        if digit > 15:
            return -1
        value = value << 4 | digit
    return value


cdef Py_ssize_t _utf8_length(const unsigned char* p, Py_ssize_t i, Py_ssize_t n):
    cdef unsigned char lead = p[i]
    cdef Py_ssize_t size = SEQUENCE[lead], k
    if size == 0 or i + size > n or not SECOND_LOW[lead] <= p[i + 1] <= SECOND_HIGH[lead]:
        return 0
    for k in range(2, size):
        if p[i + k] & 0xC0 != 0x80:
            return 0
    return size


cdef long long _escaped_size(long long c):
    if c == 34 or c == 92 or c == 8 or c == 9 or c == 10 or c == 12 or c == 13:
        return 2
    return 6 if c < 0x20 else 1


cpdef list long_strings(bytes raw, long long least):
    cdef const unsigned char* p = raw
    cdef Py_ssize_t n = len(raw), i = 0, start, end, size
    cdef long long shorter, unwritten, unit, low
    cdef unsigned char kind, escape
    cdef const void* quote
    found = []
    while True:
        quote = memchr(p + i, 34, n - i) if i < n else NULL  # outside strings: quotes only
        if quote == NULL:
            return found
        start = i = <const unsigned char*>quote - p + 1
        shorter = unwritten = 0
        while True:
            if i >= n:
                raise ValueError("a string does not end")
            kind = CLASS[p[i]]
            if kind == PLAIN:
                i += 1
            elif kind == QUOTE:
                break
            elif kind == HIGH:
                size = _utf8_length(p, i, n)
                if size == 0:
                    raise ValueError("not UTF-8")
                i += size
            elif kind == CONTROL:
                raise ValueError("a control character in a string")
            elif i + 1 >= n:
                raise ValueError("a string does not end")
            elif p[i + 1] == 117:
                if i + 6 > n:
                    raise ValueError("a string does not end")
                unit = _hex4(p, i + 2)
                if unit < 0:
                    raise ValueError("a bad escape")
                i += 6
                if unit < 0x80:
                    shorter += 5
                    unwritten += 6 - _escaped_size(unit)
                elif unit < 0x800:
                    shorter += 4
                    unwritten += 4
                elif unit < 0xD800 or unit > 0xDFFF:
                    shorter += 3
                    unwritten += 3
                else:
                    low = _hex4(p, i + 2) if (unit <= 0xDBFF and i + 6 <= n and p[i] == 92
                                              and p[i + 1] == 117) else -1
                    if 0xDC00 <= low <= 0xDFFF:  # a pair: twelve bytes, four decoded
                        i += 6
                        shorter += 8
                        unwritten += 8
                    else:  # a lone surrogate: three bytes decoded, written as its escape
                        shorter += 3
            else:
                escape = p[i + 1]
                if escape == 47:
                    unwritten += 1
                elif not (escape == 34 or escape == 92 or escape == 98 or escape == 102
                          or escape == 110 or escape == 114 or escape == 116):
                    raise ValueError("a bad escape")
                i += 2
                shorter += 1
        end = i
        i += 1
        if end - start < least:
            continue
        size = i
        while size < n and (p[size] == 32 or p[size] == 9 or p[size] == 10 or p[size] == 13):
            size += 1
        if size < n and p[size] == 58:  # a key
            continue
        found += [start, end, end - start - shorter, end - start + 2 - unwritten]
