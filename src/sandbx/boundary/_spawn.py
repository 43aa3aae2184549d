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
import time

from sandbx._fdio import write_all
from sandbx._value import value
from sandbx.boundary._clone import clone_into, ensure_single_threaded
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
from sandbx.boundary._signals import SIGHUP, SIGINT, SIGQUIT, SIGTERM, name_of, pidfd_kill
from sandbx.boundary._stage_command import run_command_stage
from sandbx.boundary._stderr_guard import Defang, StderrGuard
from sandbx.boundary._syscalls import (
    MACHINE,
    PR_SET_DUMPABLE,
    SIG_BLOCK,
    SIG_SETMASK,
    SignalSet,
    open_signalfd,
    prctl,
    read_signal,
    set_signal_mask,
)
from sandbx.policy import Command, Policy

_READ_CHUNK = 65536

# Signals that end a run early: each kills the sandbox and is relayed as 128+n.
INTERRUPTING_SIGNALS = frozenset({SIGINT, SIGTERM, SIGHUP, SIGQUIT})
_INTERRUPTING_SET = SignalSet(INTERRUPTING_SIGNALS)

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
    abi = _landlock_abi()
    if abi < MINIMUM_ABI:
        return _refused(
            FailureReason.UNSUPPORTED,
            f"this kernel offers Landlock ABI {abi}; sandbx needs ABI {MINIMUM_ABI} "
            "(Linux 6.10) or later with Landlock enabled",
        )
    if not is_supported_machine():
        return _refused(FailureReason.UNSUPPORTED, f"no seccomp syscall table for {MACHINE}")
    plan = build_plan(policy, command, abi=abi, timeout_seconds=timeout_seconds)
    ensure_single_threaded()
    _become_undumpable()
    if capture is not None:
        streams = _Streams.capturing(capture.limit)
    elif stderr_guard is not None and not os.isatty(2):
        streams = _Streams.relaying(stderr_guard)
    else:
        streams = _Streams.plain()
    result = _spawn_and_supervise(plan, streams)
    return RunResult(
        result.outcome,
        plan.confinement.degraded + result.degraded,
        output=result.output,
        output_dropped=result.output_dropped,
    )


_ONCE: dict[str, int] = {}


def _landlock_abi() -> int:
    # The kernel's ABI cannot change under a running process.
    if "abi" not in _ONCE:
        _ONCE["abi"] = abi_version()
    return _ONCE["abi"]


def _become_undumpable() -> None:
    # The harness will hold secrets (an API key, under agent-run); a
    # non-dumpable process cannot be ptraced or have its /proc/PID/mem read by
    # other processes of the same user. Once per process: nothing sets it back.
    if _ONCE.get("undumpable") != os.getpid():
        prctl(PR_SET_DUMPABLE, 0)
        _ONCE["undumpable"] = os.getpid()


def _spawn_and_supervise(plan: LaunchPlan, streams: _Streams) -> RunResult:
    report_read, report_write = os.pipe2(os.O_CLOEXEC)
    streams.watch_report(report_read)
    channels = streams.channels(report_write)
    child_ends = (report_write, *streams.child_ends)
    # Blocked from before the clone to the end of the run: the child must not
    # meet sandbx's signals before it resets them, and during the run they
    # arrive through a signalfd the supervisor polls with the child's pipes.
    previous_mask = SignalSet()
    set_signal_mask(SIG_BLOCK, _INTERRUPTING_SET, previous_mask)
    # Set up before the clone: until the child execs, every page the caller
    # writes is copied for it, so the caller does as little as it can then.
    supervisor = _Supervisor(streams)
    try:
        try:
            child, pidfd = clone_into(plan.confinement.namespaces)
        except OSError as exc:
            for fd in (*child_ends, *streams.open):
                os.close(fd)
            if exc.errno in _USERNS_UNAVAILABLE:
                return _refused(
                    FailureReason.UNSUPPORTED,
                    f"this host refuses an unprivileged user namespace ({exc.strerror}); "
                    "see `sandbx doctor`",
                )
            return _refused(FailureReason.SPAWN_FAILED, f"clone: {exc.strerror}")
        if child == 0:
            # The child's copy of the report's read end must go before it checks
            # that sandbx, the only reader left, is alive.
            for fd in streams.open:
                os.close(fd)
            run_command_stage(plan, channels)
        for fd in child_ends:
            os.close(fd)
        status = supervisor.watch(child, pidfd, plan.timeout_seconds)
    finally:
        supervisor.close()
        set_signal_mask(SIG_SETMASK, previous_mask)
    failure, degraded = decode(streams.report())
    if supervisor.timed_out:
        failure = Failed(FailureReason.TIMEOUT, f"killed after {plan.timeout_seconds:g} s")
    elif supervisor.interrupted:
        number = supervisor.interrupted
        failure = Failed(
            FailureReason.INTERRUPTED,
            f"sandbx received {name_of(number)}",
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

    def __init__(self, streams: _Streams) -> None:
        self.streams = streams
        self.signals = open_signalfd(_INTERRUPTING_SET)
        self.pidfd = -1
        self.timed_out = False
        self.interrupted = 0
        self.poller = select.poll()
        for fd in (self.signals, *streams.open):
            self.poller.register(fd, select.POLLIN)

    def _kill(self) -> None:
        try:
            pidfd_kill(self.pidfd)
        except ProcessLookupError:
            return  # already gone

    def _take_signals(self) -> None:
        number = read_signal(self.signals)
        while number:
            if not self.interrupted:
                self.interrupted = number
            self._kill()
            number = read_signal(self.signals)

    def watch(self, child: int, pidfd: int, timeout_seconds: float | None) -> int:
        """Relay and collect until the pipes close and the child is gone; its wait status."""
        self.pidfd = pidfd
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        poller = self.poller
        streams = self.streams
        poller.register(pidfd, select.POLLIN)
        status: int | None = None
        while status is None or streams.open:
            for fd, _events in poller.poll(self._milliseconds_left(deadline)):
                if fd == pidfd:
                    # The child is PID 1 of its namespace: by the time it can be
                    # reaped, every process it started is gone too.
                    _pid, status = os.waitpid(child, 0)
                    poller.unregister(pidfd)
                elif fd == self.signals:
                    self._take_signals()
                elif not streams.take(fd):
                    poller.unregister(fd)
            if deadline is not None and status is None and time.monotonic() >= deadline:
                self.timed_out = True
                deadline = None
                self._kill()
        # A signal that came with the child's last breath still ends the run as
        # interrupted, rather than reaching the caller once the mask is lifted.
        self._take_signals()
        return status

    def close(self) -> None:
        os.close(self.signals)
        if self.pidfd >= 0:
            os.close(self.pidfd)

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
