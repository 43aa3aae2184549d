"""Stage 1, the supervisor: a fork of the single-threaded caller that owns a run's lifetime.

It enters the sandbox's namespaces, forks stage 2 (PID 1 of the new pid
namespace), and waits. A timeout or a signal to sandbx kills stage 2 with
SIGKILL, and the kernel then kills every process in its pid namespace before
the wait returns (pid_namespaces(7)), so nothing outlives the run. It never
returns into the caller's stack: it leaves through ``os._exit``.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import time

from sandbx.boundary._namespaces import (
    SANDBOX_NAMESPACES,
    enter_user_namespace,
    keep_mounts_private,
    map_caller,
)
from sandbx.boundary._outcome import (
    FailureReason,
    exit_code_of,
    send_exited,
    send_failed,
    send_interrupted,
    send_timeout,
)
from sandbx.boundary._plan import Channels, LaunchPlan
from sandbx.boundary._stage_command import run_command_stage
from sandbx.boundary._syscalls import PR_SET_DUMPABLE, PR_SET_PDEATHSIG, prctl

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

# Signals that end a run early: each kills the sandbox and is relayed as 128+n.
INTERRUPTING_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})

# Errors of unshare(CLONE_NEWUSER) that mean "this host does not allow it":
# EPERM (a sysctl or an LSM such as AppArmor refuses), ENOSPC (max_user_namespaces
# is 0 or used up), EINVAL (the kernel was built without user namespaces).
_USERNS_UNAVAILABLE = frozenset({errno.EPERM, errno.ENOSPC, errno.EINVAL, errno.EACCES})


def supervise(plan: LaunchPlan, channels: Channels) -> NoReturn:
    code = 1
    try:
        code = _supervise(plan, channels)
    except BaseException as exc:  # noqa: BLE001 - nothing may escape a forked child
        send_failed(channels.report, FailureReason.SPAWN_FAILED, f"supervisor: {exc!r}")
    finally:
        os._exit(code)


def _supervise(plan: LaunchPlan, channels: Channels) -> int:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # The death signal is armed only from now on: if sandbx died before this
    # line, we were already reparented and must not start anything.
    if os.getppid() != channels.cli_pid:
        return 1
    # A non-dumpable process's /proc/self files belong to root, so the id maps
    # could not be written; sandbx is made dumpable again only for this stage,
    # which the sandbox cannot see (it lives outside the new pid namespace).
    prctl(PR_SET_DUMPABLE, 1)
    try:
        enter_user_namespace(SANDBOX_NAMESPACES)
    except OSError as exc:
        reason = (
            FailureReason.UNSUPPORTED
            if exc.errno in _USERNS_UNAVAILABLE
            else FailureReason.NAMESPACE_SETUP_FAILED
        )
        send_failed(
            channels.report,
            reason,
            f"this host refuses an unprivileged user namespace ({exc.strerror}); "
            "see `sandbx doctor`",
        )
        return 1
    try:
        map_caller(plan.uid, plan.gid)
        prctl(PR_SET_DUMPABLE, 0)
        keep_mounts_private()
    except OSError as exc:
        send_failed(
            channels.report, FailureReason.NAMESPACE_SETUP_FAILED, f"namespace setup: {exc}"
        )
        return 1
    lifeline_read, lifeline_write = os.pipe2(os.O_CLOEXEC)
    child = os.fork()
    if child == 0:
        os.close(lifeline_write)
        run_command_stage(plan, channels, lifeline_read)
    os.close(lifeline_read)
    if channels.stderr is not None:
        os.close(channels.stderr)
    return _wait(child, plan.timeout_seconds, channels.report)


def _wait(child: int, timeout_seconds: float | None, report: int) -> int:
    interrupted: list[int] = []

    def interrupt(signal_number: int, _frame: object) -> None:
        if not interrupted:
            interrupted.append(signal_number)
        os.kill(child, signal.SIGKILL)

    for signal_number in INTERRUPTING_SIGNALS:
        signal.signal(signal_number, interrupt)
    # The caller blocked these across the fork so that no signal could arrive
    # before the handlers above existed.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTING_SIGNALS)
    timed_out = False
    if timeout_seconds is not None:
        timed_out = not _ends_within(child, timeout_seconds)
        if timed_out:
            os.kill(child, signal.SIGKILL)
    _pid, status = os.waitpid(child, 0)
    if timed_out:
        send_timeout(report, timeout_seconds or 0)
        return 1
    if interrupted:
        send_interrupted(report, interrupted[0])
        return 128 + interrupted[0]
    code = exit_code_of(status)
    send_exited(report, code)
    return code


def _ends_within(child: int, seconds: float) -> bool:
    pidfd = os.pidfd_open(child)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            if poller.poll(max(1, int(remaining * 1000))):
                return True
        return False
    finally:
        os.close(pidfd)
