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
from sandbx.boundary._stderr_guard import Defang, StderrGuard
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
class Capture:
    """Collect the command's stdout and stderr (stdin is /dev/null), keeping ``limit`` bytes."""

    limit: int


def run_sandboxed(
    policy: Policy,
    command: Command,
    *,
    stderr_guard: StderrGuard | None = None,
    capture: Capture | None = None,
    timeout_seconds: float | None = None,
) -> RunResult:
    """Run ``command`` under ``policy``; ``timeout_seconds`` overrides the policy's for this run.

    By default the command shares sandbx's stdin, stdout and stderr (stderr
    relayed through ``stderr_guard`` when it is not a terminal); with ``capture``
    its output is collected into the result instead.
    """
    abi = abi_version()
    if abi < MINIMUM_ABI:
        return _refused(
            FailureReason.UNSUPPORTED,
            f"this kernel offers Landlock ABI {abi}; sandbx needs ABI {MINIMUM_ABI} "
            "(Linux 6.10) or later with Landlock enabled",
        )
    if not is_supported_machine():
        return _refused(FailureReason.UNSUPPORTED, f"no seccomp syscall table for {MACHINE}")
    plan = build_plan(policy, command, abi=abi, timeout_seconds=timeout_seconds)
    # The harness will hold secrets (an API key, under agent-run); a
    # non-dumpable process cannot be ptraced or have its /proc/PID/mem read by
    # other processes of the same user.
    prctl(PR_SET_DUMPABLE, 0)
    if capture is not None:
        streams = _Streams.capturing(capture.limit)
    elif stderr_guard is not None and not os.isatty(2):
        streams = _Streams.relaying(stderr_guard)
    else:
        streams = _Streams.plain()
    result = _spawn_and_supervise(plan, streams)
    return RunResult(
        result.outcome,
        plan.degraded + result.degraded,
        output=result.output,
        output_dropped=result.output_dropped,
    )


def _spawn_and_supervise(plan: LaunchPlan, streams: _Streams) -> RunResult:
    report_read, report_write = os.pipe2(os.O_CLOEXEC)
    lifeline_read, lifeline_write = os.pipe2(os.O_CLOEXEC)
    streams.watch_report(report_read)
    channels = streams.channels(report_write)
    child_ends = (report_write, lifeline_read, *streams.child_ends)
    # Blocked across the clone so that no signal finds the child with sandbx's
    # handlers, nor the caller before its handlers know the child.
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTING_SIGNALS)
    try:
        child = clone_into(plan.namespaces)
    except OSError as exc:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        for fd in (lifeline_write, *child_ends, *streams.open):
            os.close(fd)
        if exc.errno in _USERNS_UNAVAILABLE:
            return _refused(
                FailureReason.UNSUPPORTED,
                f"this host refuses an unprivileged user namespace ({exc.strerror}); "
                "see `sandbx doctor`",
            )
        return _refused(FailureReason.SPAWN_FAILED, f"clone: {exc.strerror}")
    if child == 0:
        for fd in (lifeline_write, *streams.open):
            os.close(fd)
        run_command_stage(plan, channels, lifeline_read)
    for fd in child_ends:
        os.close(fd)
    supervisor = _Supervisor(child)
    previous_handlers = supervisor.take_signals()
    signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
    try:
        status = supervisor.watch(streams, plan.timeout_seconds)
    finally:
        for signal_number, handler in previous_handlers.items():
            signal.signal(signal_number, handler)
        # The child only needed this to learn that sandbx died; it is dead now.
        os.close(lifeline_write)
    failure, degraded = decode(streams.report())
    if supervisor.timed_out:
        failure = Failed(FailureReason.TIMEOUT, f"killed after {plan.timeout_seconds:g} s")
    elif supervisor.interrupted:
        number = supervisor.interrupted
        failure = Failed(
            FailureReason.INTERRUPTED,
            f"sandbx received {signal.Signals(number).name}",
            signal_number=number,
        )
    return RunResult(
        failure or Exited(exit_code_of(status)),
        degraded,
        output=streams.output(),
        output_dropped=streams.dropped,
    )


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

    def watch(self, streams: _Streams, timeout_seconds: float | None) -> int:
        """Relay and collect until the pipes close and the child is gone; its wait status."""
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        pidfd = os.pidfd_open(self.child)
        poller = select.poll()
        for fd in (pidfd, *streams.open):
            poller.register(fd, select.POLLIN)
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
        return status

    @staticmethod
    def _milliseconds_left(deadline: float | None) -> int:
        if deadline is None:
            return -1
        return max(0, int((deadline - time.monotonic()) * 1000) + 1)


class _Streams:
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
    def plain(cls) -> _Streams:
        return cls()

    @classmethod
    def relaying(cls, guard: StderrGuard) -> _Streams:
        return cls(guard=guard)

    @classmethod
    def capturing(cls, limit: int) -> _Streams:
        return cls(capture_limit=limit)

    def watch_report(self, report_fd: int) -> None:
        self._report_fd = report_fd
        self.open.add(report_fd)

    def channels(self, report_write: int) -> Channels:
        if self._capture_limit is not None:
            output_write, null = self.child_ends
            return Channels(
                report=report_write, stdin=null, stdout=output_write, stderr=output_write
            )
        if self.child_ends:
            return Channels(report=report_write, stderr=self.child_ends[0])
        return Channels(report=report_write)

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
