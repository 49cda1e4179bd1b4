"""Tables pickled with their arrays as raw bytes, for a forked reader's pipe and the scan cache.

Apart from `arrays` because that module may run compiled (setup.py), and a pickler subclass is
kept interpreted: mypyc builds it into code that crashes the interpreter.
"""

from __future__ import annotations

import pickle
from array import array
from typing import Any


def rebuilt_array(typecode: str, data: bytearray) -> array[Any]:
    """The array `ArrayPickler` pickled as TYPECODE and its raw bytes."""
    values = array(typecode)
    values.frombytes(data)
    return values


class ArrayPickler(pickle.Pickler):
    """Pickles arrays as their raw bytes, written straight from the array: the standard way
    copies each into a bytes object that the pickler keeps until the end (all of a large
    table's arrays twice)."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is array:
            return rebuilt_array, (obj.typecode, pickle.PickleBuffer(obj))
        return NotImplemented


def dump_arrays(obj: object, file: Any) -> None:
    """Pickle OBJ to FILE (see `ArrayPickler`)."""
    ArrayPickler(file, protocol=5).dump(obj)
