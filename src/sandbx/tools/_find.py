"""``find`` {path, pattern}: files and directories whose name contains the pattern, bounded."""

from __future__ import annotations

import os

from sandbx.tools._base import ToolOutcome, allowed, from_os_error, require_string
from sandbx.tools._walk import BoundedWalk, WalkBounds

NAME = "find"
ACCESS = "read"
ENTRY_LIMIT = 20000
RESULT_LIMIT = 500
DESCRIPTION = (
    "Find files and directories under a path whose name contains a literal pattern. "
    "Directories end in /. Symlinks are not followed."
)
INPUT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "the directory to search under"},
        "pattern": {"type": "string", "description": "text the name must contain"},
    },
    "required": ["path", "pattern"],
    "additionalProperties": False,
}


def validate(arguments: dict[str, object]) -> str:
    require_string(arguments, "pattern", empty_ok=True)
    return require_string(arguments, "path")


def in_worker(arguments: dict[str, object], path: str) -> ToolOutcome:
    pattern = str(arguments["pattern"])
    try:
        os.scandir(path).close()
    except OSError as exc:
        return from_os_error(path, ACCESS, exc)
    walk = BoundedWalk(path, WalkBounds(entries=ENTRY_LIMIT))
    found: list[str] = []
    markers: list[str] = []
    for entry, is_dir in walk.entries():
        if pattern in os.path.basename(entry):
            found.append(entry + ("/" if is_dir else ""))
            if len(found) >= RESULT_LIMIT:
                markers.append(f"[stopped at {RESULT_LIMIT} results]")
                break
    if walk.cut:
        markers.append(f"[stopped after {ENTRY_LIMIT} entries]")
    if walk.unreadable:
        markers.append(f"[{walk.unreadable} directories could not be read]")
    text = "\n".join(found) or "(nothing found)"
    return ToolOutcome(text="\n".join([text, *markers]), accesses=allowed(path, ACCESS))
