"""``grep`` {path, pattern}: literal search, ``path:line: text``, each bound with its marker."""

from __future__ import annotations

import os
from collections.abc import Iterator

from sandbx.tools._base import ToolOutcome, allowed, from_os_error, require_string
from sandbx.tools._walk import BoundedWalk, WalkBounds

NAME = "grep"
ACCESS = "read"
FILE_LIMIT = 5000
BYTE_LIMIT = 32 << 20
RESULT_LIMIT = 200
LINE_WIDTH = 300
DESCRIPTION = (
    "Search files under a path for a literal string (not a regular expression). "
    "Prints path:line: text. Symlinks are not followed; binary files are skipped."
)
INPUT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "a file or a directory to search under"},
        "pattern": {"type": "string", "description": "the literal text to find"},
    },
    "required": ["path", "pattern"],
    "additionalProperties": False,
}


def validate(arguments: dict[str, object]) -> str:
    require_string(arguments, "pattern")
    return require_string(arguments, "path")


def in_worker(arguments: dict[str, object], path: str) -> ToolOutcome:
    pattern = str(arguments["pattern"])
    try:
        is_directory = os.path.isdir(path) and not os.path.islink(path)
        if not is_directory:
            os.stat(path)
    except OSError as exc:
        return from_os_error(path, ACCESS, exc)
    walk = BoundedWalk(path, WalkBounds(entries=FILE_LIMIT))
    results, markers = _search(walk.files() if is_directory else iter([path]), pattern)
    if walk.cut:
        markers.append(f"[stopped after {FILE_LIMIT} entries]")
    if walk.unreadable:
        markers.append(f"[{walk.unreadable} directories could not be read]")
    text = "\n".join(results[:RESULT_LIMIT]) or "(no matches)"
    return ToolOutcome(text="\n".join([text, *markers]), accesses=allowed(path, ACCESS))


def _search(files: Iterator[str], pattern: str) -> tuple[list[str], list[str]]:
    results: list[str] = []
    scanned = 0
    for file in files:
        if scanned >= BYTE_LIMIT:
            return results, [f"[stopped after scanning {BYTE_LIMIT} bytes]"]
        data = _read(file)
        if data is None or b"\0" in data[:8192]:
            continue
        scanned += len(data)
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if pattern in line:
                results.append(f"{file}:{number}: {line[:LINE_WIDTH]}")
        if len(results) >= RESULT_LIMIT:
            return results, [f"[stopped at {RESULT_LIMIT} matches]"]
    return results, []


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return os.read(fd, BYTE_LIMIT)
    except OSError:
        return None
    finally:
        os.close(fd)
