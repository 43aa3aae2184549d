"""``read`` {path}: a text file, cut at a limit with a marker saying how much was shown."""

from __future__ import annotations

import os

from sandbx.tools._base import (
    OUTPUT_LIMIT,
    ToolOutcome,
    allowed,
    cap_marker,
    from_os_error,
    require_string,
)

NAME = "read"
ACCESS = "read"
DESCRIPTION = (
    "Read a UTF-8 text file. Long files are cut at 256 KiB with a marker. "
    "Paths are relative to the working directory unless absolute."
)
INPUT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "the file to read"}},
    "required": ["path"],
    "additionalProperties": False,
}


def validate(arguments: dict[str, object]) -> str:
    return require_string(arguments, "path")


def in_worker(arguments: dict[str, object], path: str) -> ToolOutcome:
    del arguments
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        return from_os_error(path, ACCESS, exc)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, OUTPUT_LIMIT + 1)
    except OSError as exc:
        return from_os_error(path, ACCESS, exc)
    finally:
        os.close(fd)
    cut = len(data) > OUTPUT_LIMIT
    data = data[:OUTPUT_LIMIT]
    if b"\0" in data:
        return _not_text(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A cut may split the last character; anything earlier is not text.
        if not (cut and exc.start >= len(data) - 3):
            return _not_text(path)
        text = data[: exc.start].decode("utf-8")
    if not text:
        return ToolOutcome(text="(no output)", accesses=allowed(path, ACCESS))
    if cut:
        text += cap_marker(len(text.encode()), max(size, OUTPUT_LIMIT + 1), "bytes")
    return ToolOutcome(text=text, accesses=allowed(path, ACCESS))


def _not_text(path: str) -> ToolOutcome:
    return ToolOutcome(
        text=f"{path} is binary or not UTF-8; read shows text files only",
        is_error=True,
        accesses=allowed(path, ACCESS),
        verdict="failed: not a text file",
    )
