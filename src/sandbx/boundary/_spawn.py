"""Run one command under a policy: the parent's side of the two-stage spawn.

The caller must be single-threaded (forking a threaded process is unsafe);
the agent's spawner process will call this same function for its tool calls.
While the command runs, sandbx relays its stderr (when stderr is not a
terminal) so that no line the command writes can pass for an audit record.
"""

from __future__ import annotations

import os
import select
import signal
from collections.abc import Callable
from types import FrameType

from sandbx._fdio import write_all
from sandbx._value import value
from sandbx.boundary._landlock import MINIMUM_ABI, abi_version
from sandbx.boundary._outcome import Failed, FailureReason, RunResult, decode
from sandbx.boundary._plan import Channels, build_plan
from sandbx.boundary._seccomp import is_supported_machine
from sandbx.boundary._stage_supervisor import INTERRUPTING_SIGNALS, supervise
from sandbx.boundary._syscalls import MACHINE, PR_SET_DUMPABLE, prctl
from sandbx.policy import Command, Policy

_READ_CHUNK = 65536


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
    report_read, report_write = os.pipe2(os.O_CLOEXEC)
    relay = None
    if stderr_guard is not None and not os.isatty(2):
        relay = os.pipe2(os.O_CLOEXEC)
    caller = os.getpid()
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTING_SIGNALS)
    try:
        supervisor = os.fork()
    except OSError as exc:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        for fd in (report_read, report_write, *(relay or ())):
            os.close(fd)
        return _refused(FailureReason.SPAWN_FAILED, f"fork: {exc.strerror}")
    if supervisor == 0:
        os.close(report_read)
        if relay is not None:
            os.close(relay[0])
        stderr_write = None if relay is None else relay[1]
        supervise(plan, Channels(report=report_write, stderr=stderr_write, cli_pid=caller))
    os.close(report_write)
    if relay is not None:
        os.close(relay[1])
    previous_handlers = _forward_signals_to(supervisor)
    signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
    try:
        report = _pump(report_read, None if relay is None else relay[0], stderr_guard)
    finally:
        os.waitpid(supervisor, 0)
        for signal_number, handler in previous_handlers.items():
            signal.signal(signal_number, handler)
    result = decode(report)
    return RunResult(result.outcome, plan.degraded + result.degraded)


def _refused(reason: FailureReason, detail: str) -> RunResult:
    return RunResult(Failed(reason, detail), ())


_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def _forward_signals_to(pid: int) -> dict[int, _Handler]:
    """While the run lasts, a signal to sandbx is passed to the supervisor, which ends the run."""

    def forward(signal_number: int, _frame: FrameType | None) -> None:
        try:
            os.kill(pid, signal_number)
        except ProcessLookupError:
            return  # the supervisor has already ended

    previous: dict[int, _Handler] = {}
    for signal_number in INTERRUPTING_SIGNALS:
        previous[signal_number] = signal.getsignal(signal_number)
        signal.signal(signal_number, forward)
    return previous


def _pump(report_fd: int, stderr_fd: int | None, guard: StderrGuard | None) -> bytes:
    """Collect the report and relay stderr until both pipes close; return the report."""
    report = bytearray()
    defang = _Defang(guard) if guard is not None and stderr_fd is not None else None
    poller = select.poll()
    open_fds = {report_fd}
    poller.register(report_fd, select.POLLIN)
    if stderr_fd is not None:
        open_fds.add(stderr_fd)
        poller.register(stderr_fd, select.POLLIN)
    while open_fds:
        for fd, _events in poller.poll():
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                poller.unregister(fd)
                open_fds.discard(fd)
                os.close(fd)
                if fd == stderr_fd and defang is not None:
                    write_all(2, defang.finish())
            elif fd == report_fd:
                report += chunk
            elif defang is not None:
                write_all(2, defang.feed(chunk))
    return bytes(report)


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
