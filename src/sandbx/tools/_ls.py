"""``ls`` {path}: a directory's entries, sorted, directories marked ``/``, cut at a limit."""

from __future__ import annotations

import os

from sandbx.tools._base import ToolOutcome, allowed, cap_marker, from_os_error, require_string

NAME = "ls"
ACCESS = "read"
ENTRY_LIMIT = 1000
DESCRIPTION = "List a directory: sorted names, directories marked with a trailing /."
INPUT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "the directory; . for here"}},
    "required": ["path"],
    "additionalProperties": False,
}


def validate(arguments: dict[str, object]) -> str:
    return require_string(arguments, "path")


def in_worker(arguments: dict[str, object], path: str) -> ToolOutcome:
    del arguments
    try:
        with os.scandir(path) as entries:
            names = sorted(
                entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")
                for entry in entries
            )
    except OSError as exc:
        return from_os_error(path, ACCESS, exc)
    shown = names[:ENTRY_LIMIT]
    text = "\n".join(shown) if shown else "(empty directory)"
    if len(names) > ENTRY_LIMIT:
        text += cap_marker(len(shown), len(names), "entries")
    return ToolOutcome(text=text, accesses=allowed(path, ACCESS))
