"""The closed set of audit records and their one exact line format.

Each record is a kind from ``RecordKind`` plus ordered fields, rendered as the
spec's line: ``<UTC time>  INFO sandbx::audit: decision="…" spawn="…" …``.
Records are metadata only: never a command's output, never an environment
value. Strings are quoted and escaped, so no field can end a line early.
"""

from __future__ import annotations

import time

from sandbx._enum import Enum
from sandbx._value import value

MARKER = "sandbx::audit:"
# What the spec's own filter looks for (`grep sandbx::audit`): no line a command
# writes may contain it, with or without the colon.
FILTER_WORD = "sandbx::audit"
# What FILTER_WORD becomes in any text sandbx relays but did not write.
NOT_A_RECORD = "sandbx::not-an-audit-record"


def unforgeable(text: str) -> str:
    """Text on stderr that sandbx did not write must not pass `grep sandbx::audit`."""
    return text.replace(FILTER_WORD, NOT_A_RECORD)


NO_SESSION = "-"
ARGS_LIMIT = 512


class RecordKind(Enum):
    SPAWNED = "spawned"
    EXITED = "exited"
    FAILED = "failed"
    DEGRADED = "degraded"
    ALLOWED = "allowed"
    ABSENT = "absent"
    DENIED = "denied"

    @property
    def level(self) -> str:
        match self:
            case RecordKind.FAILED | RecordKind.DEGRADED | RecordKind.DENIED:
                return "WARN"
            case RecordKind.SPAWNED | RecordKind.EXITED | RecordKind.ALLOWED | RecordKind.ABSENT:
                return "INFO"


FieldValue = str | int | bool | tuple[str, ...]


@value
class Record:
    kind: RecordKind
    fields: tuple[tuple[str, FieldValue], ...]

    def render(self, now: float | None = None) -> str:
        moment = time.time() if now is None else now
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment))
        micros = int(moment * 1_000_000) % 1_000_000
        body = " ".join(
            f"{name}={render_value(value)}"
            for name, value in (("decision", self.kind.value), *self.fields)
        )
        return f"{stamp}.{micros:06d}Z {self.kind.level:>5} {MARKER} {body}"


def render_value(value: FieldValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(quote(item) for item in value) + "]"
    return quote(value)


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


def quote(text: str) -> str:
    """Quote as Rust's Debug does: escapes for quotes, backslashes and every control character."""
    out = ['"']
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif not char.isprintable() or (0xD800 <= ord(char) <= 0xDFFF):
            out.append(f"\\u{{{ord(char):x}}}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def cut_args(args: tuple[str, ...], limit: int = ARGS_LIMIT) -> tuple[str, ...]:
    """Keep the first ``limit`` characters of the arguments; ``…`` marks where they were cut."""
    kept: list[str] = []
    budget = limit
    for arg in args:
        if len(arg) <= budget:
            kept.append(arg)
            budget -= len(arg)
            continue
        kept.append(arg[:budget] + "…")
        break
    return tuple(kept)
