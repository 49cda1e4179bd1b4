# cython: language_level=3, boundscheck=False, wraparound=False
"""A bound, not a scanner: the least a compiled pass over every byte of a line costs, C
pointers and a class table per byte. It finds the strings and the long ones' spans like
`transcript/scanner.py`'s `long_strings`, but checks nothing (no UTF-8, no escapes past
skipping the next byte) and measures no escape. compare_compilers.py times it beside the
scanner's builds and does not check its sizes."""

cdef unsigned char PLAIN[256]
for _byte in range(256):
    PLAIN[_byte] = 0x20 <= _byte < 0x80 and _byte != 34 and _byte != 92


cpdef list long_strings(bytes raw, long long least):
    cdef const unsigned char* p = raw
    cdef Py_ssize_t n = len(raw), i = 0, start
    cdef unsigned char c
    found = []
    while i < n:
        if p[i] != 34:
            i += 1
            continue
        i += 1
        start = i
        while i < n:
            c = p[i]
            if PLAIN[c]:
                i += 1
            elif c == 34:
                break
            elif c == 92:
                i += 2
            elif c >= 0x80:
                i += 1
            else:
                raise ValueError("a control character in a string")
        if i - start >= least:
            found += [start, i, i - start, i - start + 2]
        i += 1
    return found
