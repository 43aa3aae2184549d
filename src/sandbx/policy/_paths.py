"""Path arithmetic for vetting: canonical forms and the ancestor relation.

Pure functions over strings and ``os.stat``; nothing here opens a file for
reading or creates a process.
"""

from __future__ import annotations

import os


def canonical(path: str, *, base: str) -> str:
    """The absolute path with every symlink resolved; the tail that does not exist kept as typed."""
    absolute = path if os.path.isabs(path) else os.path.join(base, path)
    return os.path.realpath(absolute)


def is_within(inner: str, outer: str) -> bool:
    """Whether canonical ``inner`` is ``outer`` or lies below it."""
    if outer == "/":
        return True
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def overlaps(first: str, second: str) -> bool:
    """Whether either canonical path contains the other."""
    return is_within(first, second) or is_within(second, first)


def same_file(first: str, second: str) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False
