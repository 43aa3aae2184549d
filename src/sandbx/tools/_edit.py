"""``edit`` {path, old, new}: replace the one occurrence of ``old``; zero or several: no change."""

from __future__ import annotations

import os

from sandbx.tools._base import ToolOutcome, allowed, from_os_error, require_string

NAME = "edit"
ACCESS = "write"
DESCRIPTION = (
    "Replace exactly one occurrence of `old` with `new` in a text file. If `old` occurs "
    "zero times or more than once, the file is left untouched and you are told which."
)
INPUT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "the file to edit"},
        "old": {"type": "string", "description": "the exact text to replace, occurring once"},
        "new": {"type": "string", "description": "the text to put in its place"},
    },
    "required": ["path", "old", "new"],
    "additionalProperties": False,
}


def validate(arguments: dict[str, object]) -> str:
    require_string(arguments, "old")
    require_string(arguments, "new", empty_ok=True)
    return require_string(arguments, "path")


def in_worker(arguments: dict[str, object], path: str) -> ToolOutcome:
    old, new = str(arguments["old"]), str(arguments["new"])
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return from_os_error(path, ACCESS, exc)
    try:
        text = _read_all(fd).decode("utf-8")
        count = text.count(old)
        if count != 1:
            found = "does not occur" if count == 0 else f"occurs {count} times"
            return ToolOutcome(
                text=f"{path} left untouched: `old` {found}; it must occur exactly once",
                is_error=True,
                accesses=allowed(path, ACCESS),
                verdict=f"failed: `old` {found}",
            )
        updated = text.replace(old, new, 1).encode("utf-8", "surrogatepass")
        os.ftruncate(fd, 0)
        view = memoryview(updated)
        offset = 0
        while offset < len(updated):
            offset += os.pwrite(fd, view[offset:], offset)
    except UnicodeDecodeError:
        return ToolOutcome(
            text=f"{path} is not UTF-8 text; edit changes text files only",
            is_error=True,
            accesses=allowed(path, ACCESS),
            verdict="failed: not a text file",
        )
    except OSError as exc:
        return from_os_error(path, ACCESS, exc)
    finally:
        os.close(fd)
    return ToolOutcome(text=f"edited {path}: 1 occurrence replaced", accesses=allowed(path, ACCESS))


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)
