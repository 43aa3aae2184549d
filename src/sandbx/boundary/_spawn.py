"""Run one command under a policy: clone the sandboxed child, supervise it, report how it ended.

The caller must be single-threaded; the agent's spawner process is such a
caller, and runs its tool calls through ``PreparedSandbox``: the clone made,
and the child confining itself, before the command is known. The caller is
the supervisor: it enforces ``--timeout``, turns SIGINT, SIGTERM, SIGHUP and
SIGQUIT into the end of the run, and relays the command's stderr (when stderr
is not a terminal) so that no line the command writes can pass for an audit
record. The child is PID 1 of its pid namespace, so killing it kills
everything it started, and the kernel has done so before ``waitpid`` returns
(pid_namespaces(7)).
"""

from __future__ import annotations

import errno
import os

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
from sandbx.boundary._plan import LaunchPlan, build_plan
from sandbx.boundary._seccomp import is_supported_machine
from sandbx.boundary._signals import name_of
from sandbx.boundary._stage_command import run_command_stage
from sandbx.boundary._stderr_guard import StderrGuard
from sandbx.boundary._streams import Streams
from sandbx.boundary._supervisor import InterruptsBlocked, Supervisor
from sandbx.boundary._syscalls import (
    MACHINE,
    PR_SET_DUMPABLE,
    close_descriptors_but,
    prctl,
)
from sandbx.policy import Command, Policy

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
    refusal = _refusal_on_this_host()
    if refusal is not None:
        return refusal
    plan = build_plan(policy, command, abi=_landlock_abi(), timeout_seconds=timeout_seconds)
    ensure_single_threaded()
    _become_undumpable()
    if capture is not None:
        streams = Streams.capturing(capture.limit)
    elif stderr_guard is not None and not os.isatty(2):
        streams = Streams.relaying(stderr_guard)
    else:
        streams = Streams.plain()
    # Blocked from before the clone to the end of the run.
    with InterruptsBlocked():
        launched = _Launched.clone(plan, streams)
        if isinstance(launched, RunResult):
            return launched
        return launched.finish(plan.timeout_seconds)


class PreparedSandbox:
    """A sandbox made ahead of its command: cloned, confining itself, then waiting.

    The spawner keeps some ready between tool calls, so a call pays for sending
    its command and for the run, while the clone and the confinement happened
    as the model was thinking. The child reads its command only after every
    step of the confinement, seccomp included, and execs it as ``run_sandboxed``
    would; one that dies first reports why, and ``run`` returns that.
    """

    def __init__(self, policy: Policy) -> None:
        self._refusal = _refusal_on_this_host()
        self._launched: _Launched | None = None
        self._command_write = -1
        if self._refusal is not None:
            return
        ensure_single_threaded()
        _become_undumpable()
        plan = build_plan(policy, _COMMAND_TO_COME, abi=_landlock_abi())
        streams = Streams.capturing(0)
        command_read, self._command_write = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._command_write, False)
        try:
            with InterruptsBlocked():
                launched = _Launched.clone(plan, streams, command=command_read)
        finally:
            os.close(command_read)
        if isinstance(launched, RunResult):
            self._refusal = launched
            os.close(self._command_write)
            self._command_write = -1
        else:
            self._launched = launched

    def run(self, argv: tuple[str, ...], *, timeout_seconds: float, output_limit: int) -> RunResult:
        """Send ``argv`` and supervise the run; once only."""
        launched, self._launched = self._launched, None
        if launched is None:
            return self._refusal or _refused(FailureReason.SPAWN_FAILED, "already run")
        command_write, self._command_write = self._command_write, -1
        if not argv or any("\0" in word for word in argv):
            launched.discard(command_write)
            return _refused(FailureReason.EXEC_FAILED, "a command word is empty or holds a NUL")
        launched.streams.limit_capture(output_limit)
        with InterruptsBlocked():
            return launched.finish(
                timeout_seconds,
                command=b"\0".join(os.fsencode(word) for word in argv),
                command_fd=command_write,
            )

    def still_current(self) -> bool:
        """Whether every grant still names the file it named at derivation, on the host.

        A grant root replaced since (a project directory removed and made
        again) is still the old one inside this sandbox, which holds it by its
        mount; a sandbox made now would refuse the run (``grant_replaced``)
        instead. So the caller makes a new one rather than use this one.
        """
        if self._launched is None:
            return self._refusal is not None
        for grant in self._launched.plan.confinement.policy.grants:
            if grant.on_procfs:
                continue
            try:
                status = os.stat(grant.path, follow_symlinks=False)
            except OSError:
                return False
            if (status.st_dev, status.st_ino) != (grant.device, grant.inode):
                return False
        return True

    def discard(self) -> None:
        """End the waiting child unused."""
        launched, self._launched = self._launched, None
        if launched is not None:
            launched.discard(self._command_write)
            self._command_write = -1


# The plan of a prepared sandbox has no command yet; the child receives it.
_COMMAND_TO_COME = Command(argv=())


class _Launched:
    """A cloned child, its pipes and its supervisor, until the run is finished."""

    def __init__(self, plan: LaunchPlan, streams: Streams, supervisor: Supervisor) -> None:
        self.plan = plan
        self.streams = streams
        self.supervisor = supervisor

    @classmethod
    def clone(
        cls,
        plan: LaunchPlan,
        streams: Streams,
        *,
        command: int | None = None,
    ) -> _Launched | RunResult:
        """Clone the child; the caller has blocked the interrupting signals."""
        report_read, report_write = os.pipe2(os.O_CLOEXEC)
        streams.watch_report(report_read)
        channels = streams.channels(report_write, command)
        child_ends = (report_write, *streams.child_ends)
        supervisor = Supervisor(streams)
        try:
            child, pidfd = clone_into(plan.confinement.namespaces)
        except OSError as exc:
            supervisor.close()
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
            # The child keeps its channels alone. Its copy of the report's read
            # end must go before it checks that sandbx, the only reader left, is
            # alive; and a copy of any command pipe's write end (its own, or
            # another prepared sandbox's) would keep that command from ending.
            close_descriptors_but(channels.descriptors())
            run_command_stage(plan, channels)
        for fd in child_ends:
            os.close(fd)
        supervisor.adopt(child, pidfd)
        return cls(plan, streams, supervisor)

    def finish(
        self,
        timeout_seconds: float | None,
        *,
        command: bytes = b"",
        command_fd: int = -1,
    ) -> RunResult:
        supervisor = self.supervisor
        try:
            status = supervisor.watch(timeout_seconds, command=command, command_fd=command_fd)
        finally:
            supervisor.close()
        failure, degraded = decode(self.streams.report())
        if supervisor.timed_out:
            failure = Failed(FailureReason.TIMEOUT, f"killed after {timeout_seconds:g} s")
        elif supervisor.interrupted:
            number = supervisor.interrupted
            failure = Failed(
                FailureReason.INTERRUPTED,
                f"sandbx received {name_of(number)}",
                signal_number=number,
            )
        return RunResult(
            failure or Exited(exit_code_of(status)),
            self.plan.confinement.degraded + degraded,
            output=self.streams.output(),
            output_dropped=self.streams.dropped,
        )

    def discard(self, command_fd: int) -> None:
        if command_fd >= 0:
            os.close(command_fd)  # end of file, before any command: the child leaves
        self.supervisor.kill()
        os.waitpid(self.supervisor.child, 0)
        self.supervisor.close()
        for fd in tuple(self.streams.open):
            os.close(fd)
            self.streams.open.discard(fd)


def _refusal_on_this_host() -> RunResult | None:
    abi = _landlock_abi()
    if abi < MINIMUM_ABI:
        return _refused(
            FailureReason.UNSUPPORTED,
            f"this kernel offers Landlock ABI {abi}; sandbx needs ABI {MINIMUM_ABI} "
            "(Linux 6.10) or later with Landlock enabled",
        )
    if not is_supported_machine():
        return _refused(FailureReason.UNSUPPORTED, f"no seccomp syscall table for {MACHINE}")
    return None


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


def _refused(reason: FailureReason, detail: str) -> RunResult:
    return RunResult(Failed(reason, detail), ())
