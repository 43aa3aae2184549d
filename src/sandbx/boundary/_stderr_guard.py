"""The stderr guard: no line a command writes may carry what marks an audit record.

Records and the command's stderr share one stream; when sandbx relays the
command's stderr it rewrites every occurrence of the marker, including one
split across reads, so a command cannot forge a record.
"""

from __future__ import annotations

from sandbx._value import value


@value
class StderrGuard:
    """A byte string the command's stderr may not carry, and what replaces it."""

    marker: bytes
    replacement: bytes


class Defang:
    """Rewrites every occurrence of the marker, including one split across reads."""

    def __init__(self, guard: StderrGuard) -> None:
        self._marker = guard.marker
        self._replacement = guard.replacement
        self._held = b""
        self._last_byte = b"\n"

    def feed(self, chunk: bytes) -> bytes:
        data = (self._held + chunk).replace(self._marker, self._replacement)
        # Hold back the longest tail that could still begin the marker, so a
        # marker written in two pieces is caught when its second piece arrives.
        keep = 0
        for length in range(min(len(self._marker) - 1, len(data)), 0, -1):
            if self._marker.startswith(data[-length:]):
                keep = length
                break
        self._held = data[len(data) - keep :]
        released = data[: len(data) - keep]
        if released:
            self._last_byte = released[-1:]
        return released

    def finish(self) -> bytes:
        tail = self._held
        self._held = b""
        if tail:
            self._last_byte = tail[-1:]
        # A record must begin its own line; end the command's unterminated one.
        return tail + (b"" if self._last_byte == b"\n" else b"\n")
