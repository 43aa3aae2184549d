"""The pipes of one sandboxed run, as its supervisor sees them.

The report pipe is always there (the child's failures and degraded steps);
the command's output is relayed to stderr through the record guard, captured
up to a limit, or not piped at all.
"""

from __future__ import annotations

import os

from sandbx._fdio import write_all
from sandbx.boundary._plan import Channels
from sandbx.boundary._stderr_guard import Defang, StderrGuard

_READ_CHUNK = 65536


class Streams:
    """The pipes of one run: the report (collected), and the command's output, which is
    either relayed to sandbx's stderr through the guard, captured up to a limit, or
    not piped at all (the command writes to sandbx's own descriptors)."""

    def __init__(
        self, *, guard: StderrGuard | None = None, capture_limit: int | None = None
    ) -> None:
        self._report_fd = -1
        self._report = bytearray()
        self._defang = None if guard is None else Defang(guard)
        self._capture_limit = capture_limit
        self._captured = bytearray()
        self.dropped = 0
        self.open: set[int] = set()
        self.child_ends: tuple[int, ...] = ()
        self._output_fd = -1
        if guard is not None or capture_limit is not None:
            self._output_fd, output_write = os.pipe2(os.O_CLOEXEC)
            self.open.add(self._output_fd)
            self.child_ends = (output_write,)
            if capture_limit is not None:
                null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
                self.child_ends = (output_write, null)

    @classmethod
    def plain(cls) -> Streams:
        return cls()

    @classmethod
    def relaying(cls, guard: StderrGuard) -> Streams:
        return cls(guard=guard)

    @classmethod
    def capturing(cls, limit: int) -> Streams:
        return cls(capture_limit=limit)

    def watch_report(self, report_fd: int) -> None:
        self._report_fd = report_fd
        self.open.add(report_fd)

    def channels(self, report_write: int, command: int | None = None) -> Channels:
        if self._capture_limit is not None:
            output_write, null = self.child_ends
            return Channels(
                report=report_write,
                stdin=null,
                stdout=output_write,
                stderr=output_write,
                command=command,
            )
        if self.child_ends:
            return Channels(report=report_write, stderr=self.child_ends[0], command=command)
        return Channels(report=report_write, command=command)

    def limit_capture(self, limit: int) -> None:
        """Set the capture's limit for a run whose pipes were made before its request."""
        self._capture_limit = limit

    def take(self, fd: int) -> bool:
        """Read once from ``fd``; False when it reached its end (and is closed)."""
        chunk = os.read(fd, _READ_CHUNK)
        if not chunk:
            self.open.discard(fd)
            os.close(fd)
            if fd == self._output_fd and self._defang is not None:
                write_all(2, self._defang.finish())
            return False
        if fd == self._report_fd:
            self._report += chunk
        elif self._capture_limit is not None:
            room = max(0, self._capture_limit - len(self._captured))
            self._captured += chunk[:room]
            self.dropped += max(0, len(chunk) - room)
        elif self._defang is not None:
            write_all(2, self._defang.feed(chunk))
        return True

    def report(self) -> bytes:
        return bytes(self._report)

    def output(self) -> bytes:
        return bytes(self._captured)
