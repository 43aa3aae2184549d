"""The confined worker's side: decode a file-tool request, run the tool, encode its outcome.

Runs inside the worker process only, after it has confined itself; the path it
receives was already checked lexically against the run's roots.
"""

from __future__ import annotations

import json

from sandbx.tools import _edit, _find, _grep, _ls, _read, _write
from sandbx.tools._base import AccessKind, FileAccess, ToolOutcome

IN_WORKER = {module.NAME: module.in_worker for module in (_read, _write, _edit, _ls, _grep, _find)}


def encode_request(tool: str, arguments: dict[str, object], path: str) -> bytes:
    return json.dumps({"tool": tool, "arguments": arguments, "path": path}).encode(
        "utf-8", "surrogatepass"
    )


def handle(request: bytes) -> bytes:
    decoded = json.loads(request.decode("utf-8", "surrogatepass"))
    outcome = IN_WORKER[decoded["tool"]](decoded["arguments"], decoded["path"])
    return encode_outcome(outcome)


def encode_outcome(outcome: ToolOutcome) -> bytes:
    return json.dumps(
        {
            "text": outcome.text,
            "is_error": outcome.is_error,
            "verdict": outcome.verdict,
            "accesses": [
                [access.kind.value, access.path, access.access, access.reason]
                for access in outcome.accesses
            ],
        }
    ).encode("utf-8", "surrogatepass")


def decode_outcome(response: bytes) -> ToolOutcome:
    decoded = json.loads(response.decode("utf-8", "surrogatepass"))
    return ToolOutcome(
        text=str(decoded["text"]),
        is_error=bool(decoded["is_error"]),
        verdict=str(decoded["verdict"]),
        accesses=tuple(
            FileAccess(kind=AccessKind(kind), path=path, access=access, reason=reason)
            for kind, path, access, reason in decoded["accesses"]
        ),
    )
