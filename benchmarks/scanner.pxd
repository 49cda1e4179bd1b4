# C types for Cython over the unchanged transcript/scanner.py (an "augmenting" .pxd: Cython
# reads it beside the .py of the same name). Used only by compare_compilers.py, which copies
# both into a temporary directory as one module; the package never builds with it.
cimport cython

ctypedef long long i64_t

cdef i64_t _QUOTE
cdef i64_t _BACKSLASH

@cython.locals(value=i64_t, end=i64_t, c=i64_t)
cdef i64_t _hex4(bytes raw, i64_t i) except? -2

@cython.locals(lead=i64_t, low=i64_t, high=i64_t, size=i64_t, second=i64_t, k=i64_t,
               follow=i64_t)
cdef i64_t _utf8_length(bytes raw, i64_t i, i64_t n) except? -2

cdef i64_t _escaped_size(i64_t c)

@cython.locals(c=i64_t)
cdef bint _is_key(bytes raw, i64_t i, i64_t n) except? -2

@cython.locals(unit=i64_t, low=i64_t)
cdef (i64_t, i64_t, i64_t) _unicode_escape(bytes raw, i64_t i, i64_t n) except *

@cython.locals(escape=i64_t)
cdef (i64_t, i64_t, i64_t) _escape(bytes raw, i64_t i, i64_t n) except *

@cython.locals(shorter=i64_t, unwritten=i64_t, c=i64_t, size=i64_t, after=i64_t, less=i64_t,
               unwritten_here=i64_t)
cdef (i64_t, i64_t, i64_t) _string_body(bytes raw, i64_t i, i64_t n) except *

@cython.locals(n=i64_t, i=i64_t, start=i64_t, end=i64_t, shorter=i64_t, unwritten=i64_t)
cpdef list long_strings(bytes raw, i64_t least)
