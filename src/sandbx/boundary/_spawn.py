"""Run one command under a policy: clone the sandboxed child, supervise it, report how it ended.

The caller must be single-threaded; the agent's spawner process will call this
same function for its tool calls. The caller is the supervisor: it enforces
``--timeout``, turns SIGINT, SIGTERM, SIGHUP and SIGQUIT into the end of the
run, and relays the command's stderr (when stderr is not a terminal) so that no
line the command writes can pass for an audit record. The child is PID 1 of its
pid namespace, so killing it kills everything it started, and the kernel has
done so before ``waitpid`` returns (pid_namespaces(7)).
"""

from __future__ import annotations

import errno
import os
import select
import signal
import time

from sandbx._fdio import write_all
from sandbx._value import value
from sandbx.boundary._clone import clone_into
from sandbx.boundary._landlock import MINIMUM_ABI, abi_version
from sandbx.boundary._outcome import (
    Exited,
    Failed,
    FailureReason,
    RunResult,
    decode,
    exit_code_of,
)
from sandbx.boundary._plan import Channels, LaunchPlan, build_plan
from sandbx.boundary._seccomp import is_supported_machine
from sandbx.boundary._stage_command import run_command_stage
from sandbx.boundary._syscalls import MACHINE, PR_SET_DUMPABLE, prctl
from sandbx.policy import Command, Policy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    _Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None

_READ_CHUNK = 65536

# Signals that end a run early: each kills the sandbox and is relayed as 128+n.
INTERRUPTING_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})

# Errors of clone(CLONE_NEWUSER) that mean "this host does not allow it": EPERM
# (a sysctl or an LSM such as AppArmor refuses), ENOSPC (max_user_namespaces is
# 0 or used up), EINVAL (a kernel built without user namespaces).
_USERNS_UNAVAILABLE = frozenset({errno.EPERM, errno.ENOSPC, errno.EINVAL, errno.EACCES})


@value
class StderrGuard:
    """A byte string the command's stderr may not carry, and what replaces it."""

    marker: bytes
    replacement: bytes


def run_sandboxed(
    policy: Policy,
    command: Command,
    *,
    stderr_guard: StderrGuard | None = None,
) -> RunResult:
    abi = abi_version()
    if abi < MINIMUM_ABI:
        return _refused(
            FailureReason.UNSUPPORTED,
            f"this kernel offers Landlock ABI {abi}; sandbx needs ABI {MINIMUM_ABI} "
            "(Linux 6.10) or later with Landlock enabled",
        )
    if not is_supported_machine():
        return _refused(FailureReason.UNSUPPORTED, f"no seccomp syscall table for {MACHINE}")
    plan = build_plan(policy, command, abi=abi)
    # The harness will hold secrets (an API key, under agent-run); a
    # non-dumpable process cannot be ptraced or have its /proc/PID/mem read by
    # other processes of the same user.
    prctl(PR_SET_DUMPABLE, 0)
    result = _spawn_and_supervise(plan, stderr_guard)
    return RunResult(result.outcome, plan.degraded + result.degraded)


def _spawn_and_supervise(plan: LaunchPlan, guard: StderrGuard | None) -> RunResult:
    report_read, report_write = os.pipe2(os.O_CLOEXEC)
    lifeline_read, lifeline_write = os.pipe2(os.O_CLOEXEC)
    relay = os.pipe2(os.O_CLOEXEC) if guard is not None and not os.isatty(2) else None
    stderr_write = None if relay is None else relay[1]
    child_ends = (report_write, lifeline_read, *(() if stderr_write is None else (stderr_write,)))
    # Blocked across the clone so that no signal finds the child with sandbx's
    # handlers, nor the caller before its handlers know the child.
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTING_SIGNALS)
    try:
        child = clone_into(plan.namespaces)
    except OSError as exc:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        for fd in (report_read, lifeline_write, *child_ends, *(relay or ())[:1]):
            os.close(fd)
        if exc.errno in _USERNS_UNAVAILABLE:
            return _refused(
                FailureReason.UNSUPPORTED,
                f"this host refuses an unprivileged user namespace ({exc.strerror}); "
                "see `sandbx doctor`",
            )
        return _refused(FailureReason.SPAWN_FAILED, f"clone: {exc.strerror}")
    if child == 0:
        os.close(report_read)
        os.close(lifeline_write)
        if relay is not None:
            os.close(relay[0])
        run_command_stage(plan, Channels(report=report_write, stderr=stderr_write), lifeline_read)
    for fd in child_ends:
        os.close(fd)
    supervisor = _Supervisor(child)
    previous_handlers = supervisor.take_signals()
    signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
    try:
        report, status = supervisor.watch(
            report_read, None if relay is None else relay[0], guard, plan.timeout_seconds
        )
    finally:
        for signal_number, handler in previous_handlers.items():
            signal.signal(signal_number, handler)
        # The child only needed this to learn that sandbx died; it is dead now.
        os.close(lifeline_write)
    failure, degraded = decode(report)
    if supervisor.timed_out:
        failure = Failed(FailureReason.TIMEOUT, f"killed after {plan.timeout_seconds:g} s")
    elif supervisor.interrupted:
        number = supervisor.interrupted
        failure = Failed(
            FailureReason.INTERRUPTED,
            f"sandbx received {signal.Signals(number).name}",
            signal_number=number,
        )
    return RunResult(failure or Exited(exit_code_of(status)), degraded)


def _refused(reason: FailureReason, detail: str) -> RunResult:
    return RunResult(Failed(reason, detail), ())


class _Supervisor:
    """Watches one child: its pipes, its exit, its deadline, and signals sent to sandbx."""

    def __init__(self, child: int) -> None:
        self.child = child
        self.timed_out = False
        self.interrupted = 0

    def take_signals(self) -> dict[int, _Handler]:
        previous: dict[int, _Handler] = {}
        for signal_number in INTERRUPTING_SIGNALS:
            previous[signal_number] = signal.getsignal(signal_number)
            signal.signal(signal_number, self._interrupt)
        return previous

    def _interrupt(self, signal_number: int, _frame: FrameType | None) -> None:
        if not self.interrupted:
            self.interrupted = signal_number
        self._kill()

    def _kill(self) -> None:
        try:
            os.kill(self.child, signal.SIGKILL)
        except ProcessLookupError:
            return  # already reaped

    def watch(
        self,
        report_fd: int,
        stderr_fd: int | None,
        guard: StderrGuard | None,
        timeout_seconds: float | None,
    ) -> tuple[bytes, int]:
        """Relay and collect until the pipes close and the child is gone; its wait status."""
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        pidfd = os.pidfd_open(self.child)
        poller = select.poll()
        for fd in (report_fd, pidfd, *(() if stderr_fd is None else (stderr_fd,))):
            poller.register(fd, select.POLLIN)
        streams = _Streams(report_fd, stderr_fd, guard)
        status: int | None = None
        while status is None or streams.open:
            for fd, _events in poller.poll(self._milliseconds_left(deadline)):
                if fd == pidfd:
                    # The child is PID 1 of its namespace: by the time it can be
                    # reaped, every process it started is gone too.
                    _pid, status = os.waitpid(self.child, 0)
                    poller.unregister(pidfd)
                    os.close(pidfd)
                elif not streams.take(fd):
                    poller.unregister(fd)
            if deadline is not None and status is None and time.monotonic() >= deadline:
                self.timed_out = True
                deadline = None
                self._kill()
        return streams.report(), status

    @staticmethod
    def _milliseconds_left(deadline: float | None) -> int:
        if deadline is None:
            return -1
        return max(0, int((deadline - time.monotonic()) * 1000) + 1)


class _Streams:
    """The report pipe, collected, and the command's stderr, relayed through the guard."""

    def __init__(self, report_fd: int, stderr_fd: int | None, guard: StderrGuard | None) -> None:
        self._report_fd = report_fd
        self._report = bytearray()
        self._defang = _Defang(guard) if guard is not None and stderr_fd is not None else None
        self.open = {report_fd} | (set() if stderr_fd is None else {stderr_fd})

    def take(self, fd: int) -> bool:
        """Read once from ``fd``; False when it reached its end (and is closed)."""
        chunk = os.read(fd, _READ_CHUNK)
        if not chunk:
            self.open.discard(fd)
            os.close(fd)
            if fd != self._report_fd and self._defang is not None:
                write_all(2, self._defang.finish())
            return False
        if fd == self._report_fd:
            self._report += chunk
        elif self._defang is not None:
            write_all(2, self._defang.feed(chunk))
        return True

    def report(self) -> bytes:
        return bytes(self._report)


class _Defang:
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
