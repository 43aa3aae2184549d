"""``write`` {path, content}: create or replace a file, never through a symlink at the leaf."""

from __future__ import annotations

import os

from sandbx.tools._base import ToolOutcome, allowed, from_os_error, require_string

NAME = "write"
ACCESS = "write"
DESCRIPTION = (
    "Create a file, or replace its whole content. Refuses to write through a symlink. "
    "Paths are relative to the working directory unless absolute."
)
INPUT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "the file to create or replace"},
        "content": {"type": "string", "description": "the file's new content"},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


def validate(arguments: dict[str, object]) -> str:
    require_string(arguments, "content", empty_ok=True)
    return require_string(arguments, "path")


def in_worker(arguments: dict[str, object], path: str) -> ToolOutcome:
    content = str(arguments["content"]).encode("utf-8", "surrogatepass")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        return from_os_error(path, ACCESS, exc)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        return from_os_error(path, ACCESS, exc)
    finally:
        os.close(fd)
    return ToolOutcome(text=f"wrote {len(content)} bytes to {path}", accesses=allowed(path, ACCESS))
