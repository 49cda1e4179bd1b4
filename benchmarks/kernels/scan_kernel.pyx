# cython: boundscheck=False, wraparound=False, language_level=3
# The loop of scan_kernel.py typed for Cython (C integers, a pointer into the line's bytes).


cdef long long _hex4(const unsigned char* raw, Py_ssize_t i) noexcept:
    cdef long long value = 0
    cdef Py_ssize_t end = i + 4
    cdef unsigned char c
    while i < end:
        c = raw[i]
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


cdef Py_ssize_t _utf8_length(const unsigned char* raw, Py_ssize_t i, Py_ssize_t n) noexcept:
    cdef unsigned char lead = raw[i]
    cdef unsigned char low = 0x80, high = 0xBF, follow
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
    if i + size > n:
        return 0
    if raw[i + 1] < low or raw[i + 1] > high:
        return 0
    k = 2
    while k < size:
        follow = raw[i + k]
        if follow < 0x80 or follow > 0xBF:
            return 0
        k += 1
    return size


def string_bytes(const unsigned char[:] line):
    if line.shape[0] == 0:
        return 0
    cdef const unsigned char* raw = &line[0]
    cdef Py_ssize_t n = line.shape[0], i = 0, size
    cdef long long total = 0, unit, second
    cdef unsigned char c, escape
    while i < n:
        if raw[i] != 34:
            i += 1
            continue
        i += 1
        while True:
            if i >= n:
                return -1
            c = raw[i]
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
                size = _utf8_length(raw, i, n)
                if size == 0:
                    return -1
                total += size
                i += size
                continue
            if i + 1 >= n:
                return -1
            escape = raw[i + 1]
            if escape != 117:
                if escape not in (34, 92, 47, 98, 102, 110, 114, 116):
                    return -1
                total += 1
                i += 2
                continue
            if i + 6 > n:
                return -1
            unit = _hex4(raw, i + 2)
            if unit < 0:
                return -1
            i += 6
            if 0xD800 <= unit <= 0xDBFF and i + 6 <= n and raw[i] == 92 and raw[i + 1] == 117:
                second = _hex4(raw, i + 2)
                if 0xDC00 <= second <= 0xDFFF:
                    total += 4
                    i += 6
                    continue
            total += 1 if unit < 0x80 else (2 if unit < 0x800 else 3)
    return total
