"""Supervising one sandboxed child: its pipes, its exit, its deadline, and sandbx's signals.

The caller keeps SIGINT, SIGTERM, SIGHUP and SIGQUIT blocked while it
supervises; they arrive through a signalfd polled beside the child's pidfd and
pipes, and each one kills the child and ends the run as interrupted. A command
given after the clone (a prepared sandbox) is written to the child's command
pipe from the same loop, so a child that never reads it cannot hang sandbx.
"""

from __future__ import annotations

import errno
import os
import select
import time

from sandbx.boundary._signals import SIGHUP, SIGINT, SIGQUIT, SIGTERM, pidfd_kill
from sandbx.boundary._streams import Streams
from sandbx.boundary._syscalls import (
    SIG_BLOCK,
    SIG_SETMASK,
    SignalSet,
    open_signalfd,
    read_signal,
    set_signal_mask,
)

# Signals that end a run early: each kills the sandbox and is relayed as 128+n.
INTERRUPTING_SIGNALS = frozenset({SIGINT, SIGTERM, SIGHUP, SIGQUIT})
INTERRUPTING_SET = SignalSet(INTERRUPTING_SIGNALS)


class InterruptsBlocked:
    """``with InterruptsBlocked():`` the interrupting signals are blocked, then the caller's
    mask comes back. Around a clone, so that the child does not meet sandbx's signals
    before it resets them; around a run, so that they reach the supervisor's signalfd."""

    def __enter__(self) -> None:
        self._previous = SignalSet()
        set_signal_mask(SIG_BLOCK, INTERRUPTING_SET, self._previous)

    def __exit__(self, *_exception: object) -> None:
        set_signal_mask(SIG_SETMASK, self._previous)


class Supervisor:
    """Made before the clone: until the child execs, every page the caller writes is
    copied for it, so the caller does as little as it can then."""

    def __init__(self, streams: Streams) -> None:
        self.streams = streams
        self.signals = open_signalfd(INTERRUPTING_SET)
        self.child = 0
        self.pidfd = -1
        self.timed_out = False
        self.interrupted = 0
        self._status: int | None = None
        self._command = b""
        self._command_fd = -1
        self.poller = select.poll()
        for fd in (self.signals, *streams.open):
            self.poller.register(fd, select.POLLIN)

    def adopt(self, child: int, pidfd: int) -> None:
        self.child = child
        self.pidfd = pidfd

    def kill(self) -> None:
        try:
            pidfd_kill(self.pidfd)
        except ProcessLookupError:
            return  # already gone

    def watch(
        self, timeout_seconds: float | None, *, command: bytes = b"", command_fd: int = -1
    ) -> int:
        """Relay and collect until the pipes close and the child is gone; its wait status."""
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        self._command, self._command_fd = command, command_fd
        self.poller.register(self.pidfd, select.POLLIN)
        if command_fd >= 0:
            self.poller.register(command_fd, select.POLLOUT)
        while self._status is None or self.streams.open:
            for fd, _events in self.poller.poll(self._milliseconds_left(deadline)):
                self._on_ready(fd)
            if deadline is not None and self._status is None and time.monotonic() >= deadline:
                self.timed_out = True
                deadline = None
                self.kill()
        if self._command_fd >= 0:
            os.close(self._command_fd)  # the child died before reading it all
        # A signal that came with the child's last breath still ends the run as
        # interrupted, rather than reaching the caller once the mask is lifted.
        self._take_signals()
        return self._status

    def _on_ready(self, fd: int) -> None:
        if fd == self.pidfd:
            # The child is PID 1 of its namespace: by the time it can be
            # reaped, every process it started is gone too.
            _pid, self._status = os.waitpid(self.child, 0)
            self.poller.unregister(fd)
        elif fd == self.signals:
            self._take_signals()
        elif fd == self._command_fd:
            self._command = _feed(fd, self._command)
            if not self._command:
                self.poller.unregister(fd)
                os.close(fd)
                self._command_fd = -1
        elif not self.streams.take(fd):
            self.poller.unregister(fd)

    def close(self) -> None:
        os.close(self.signals)
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1

    def _take_signals(self) -> None:
        number = read_signal(self.signals)
        while number:
            if not self.interrupted:
                self.interrupted = number
            self.kill()
            number = read_signal(self.signals)

    @staticmethod
    def _milliseconds_left(deadline: float | None) -> int:
        if deadline is None:
            return -1
        return max(0, int((deadline - time.monotonic()) * 1000) + 1)


def _feed(fd: int, pending: bytes) -> bytes:
    """Write what the pipe takes now; what is left. Nothing is left once the reader is gone."""
    try:
        written = os.write(fd, pending)
    except BlockingIOError:
        return pending
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            return b""
        raise
    return pending[written:]
