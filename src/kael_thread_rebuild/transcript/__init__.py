"""Reading a transcript file: JSON lines in byte ranges, unreadable lines, a torn tail, the
file digest; the JSON of Node; long lines read without their long strings."""
