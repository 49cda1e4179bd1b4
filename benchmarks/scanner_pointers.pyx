# cython: language_level=3, boundscheck=False, wraparound=False
"""The payload scanner's pass written with C pointers (a second source, kept only for this
measurement): `transcript/scanner.py`'s `long_strings` with the same rules (UTF-8 and escapes
checked, every string measured, keys left out) over a `const unsigned char*` and a class per
byte. compare_compilers.py checks its sizes as it checks the scanner's builds: it is what a
checked pass over every byte costs at best, where `byte_loop_bound.pyx` checks nothing."""

cdef unsigned char PLAIN = 0, QUOTE = 1, BACKSLASH = 2, CONTROL = 3, HIGH = 4
cdef unsigned char CLASS[256]
for _byte in range(256):
    CLASS[_byte] = (QUOTE if _byte == 34 else BACKSLASH if _byte == 92 else
                    CONTROL if _byte < 0x20 else PLAIN if _byte < 0x80 else HIGH)


cdef long long _hex4(const unsigned char* p, Py_ssize_t i):
    cdef long long value = 0
    cdef Py_ssize_t end = i + 4
    cdef unsigned char c
    while i < end:
        c = p[i]
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


cdef Py_ssize_t _utf8_length(const unsigned char* p, Py_ssize_t i, Py_ssize_t n):
    cdef unsigned char lead = p[i], low = 0x80, high = 0xBF
    cdef Py_ssize_t size, k
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
    if i + size > n or p[i + 1] < low or p[i + 1] > high:
        return 0
    for k in range(2, size):
        if p[i + k] < 0x80 or p[i + k] > 0xBF:
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
    found = []
    while i < n:
        if p[i] != 34:
            i += 1
            continue
        i += 1
        start = i
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
    return found
