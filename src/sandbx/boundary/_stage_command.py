"""The sandboxed child: PID 1 of its namespaces, which locks itself down and then execs.

One irreducible sequence, kept in one module because its order is the
security argument: the id maps come first (nothing else works before them);
mounts need capabilities, so they come next; capabilities
go before Landlock and seccomp; no_new_privs before either (landlock(7),
seccomp(2)); the pin is checked after Landlock, on the very descriptor that is
executed; seccomp last of all, since it forbids calls the steps before it make.
Any failure is reported as one label from ``FailureReason`` and the process
leaves with ``os._exit``; nothing runs unconfined by fallback.
"""

from __future__ import annotations

import errno
import os
import resource
import select
import signal
from collections.abc import Callable

from sandbx.boundary import _landlock, _seccomp
from sandbx.boundary._capabilities import drop_every_capability
from sandbx.boundary._mounts import confine_mounts
from sandbx.boundary._namespaces import keep_mounts_private, map_caller, mount_own_proc
from sandbx.boundary._outcome import FailureReason, StageFailure, send_degraded, send_failed
from sandbx.boundary._pinned import open_pinned
from sandbx.boundary._plan import Channels, LaunchPlan, PathRule
from sandbx.boundary._resolver import lay_resolver_files
from sandbx.boundary._syscalls import (
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    close_range_cloexec,
    prctl,
)
from sandbx.policy import Pin, sha256_of_fd, starts_with_shebang

# Dispositions the Python runtime changed (it ignores SIGPIPE and SIGXFSZ) or
# that sandbx set; an ignored signal would survive execve(2).
_SIGNALS_TO_RESET = (
    signal.SIGPIPE,
    signal.SIGXFSZ,
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def run_command_stage(plan: LaunchPlan, channels: Channels, lifeline: int) -> NoReturn:
    try:
        _confine_and_exec(plan, channels, lifeline)
    except StageFailure as failure:
        send_failed(channels.report, failure.reason, failure.detail)
    except BaseException as exc:  # noqa: BLE001 - nothing may escape a forked child
        send_failed(channels.report, FailureReason.SPAWN_FAILED, f"command stage: {exc!r}")
    finally:
        os._exit(127)


def _confine_and_exec(plan: LaunchPlan, channels: Channels, lifeline: int) -> None:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _exit_if_supervisor_gone(lifeline)
    for signal_number in _SIGNALS_TO_RESET:
        signal.signal(signal_number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    for fd, standard in ((channels.stdin, 0), (channels.stdout, 1), (channels.stderr, 2)):
        if fd is not None:
            os.dup2(fd, standard)
    _step(FailureReason.NAMESPACE_SETUP_FAILED, "mapping the caller's ids", lambda: _map_ids(plan))
    _set_up_mounts(plan)
    rule_fds = [_open_pinned_grant(rule) for rule in plan.path_rules]
    resolver_fds = _lay_resolver(plan)
    _drop_privileges(channels)
    _apply_landlock(plan, rule_fds, resolver_fds)
    program_fd = None if plan.pin is None else _checked_pin(plan.pin)
    _step(
        FailureReason.SECCOMP,
        "installing the seccomp filter",
        lambda: _seccomp.install(plan.seccomp),
    )
    close_range_cloexec(3)
    _exec(plan, program_fd)


def _map_ids(plan: LaunchPlan) -> None:
    # A non-dumpable process's /proc/self files belong to root, so the id maps
    # could not be written; the child is dumpable only for these writes.
    prctl(PR_SET_DUMPABLE, 1)
    map_caller(plan.uid, plan.gid)
    prctl(PR_SET_DUMPABLE, 0)


def _set_up_mounts(plan: LaunchPlan) -> None:
    keep_mounts_private()
    if plan.mount_proc:
        _step(FailureReason.NAMESPACE_SETUP_FAILED, "mounting the sandbox's /proc", mount_own_proc)
    _step(
        FailureReason.NAMESPACE_SETUP_FAILED,
        "making mounts read-only and no-exec outside the grants",
        lambda: confine_mounts(plan.mounts),
    )
    # The working directory still names the mount it was entered through; a
    # write grant's new mount covers it only once the path is resolved again.
    _step(
        FailureReason.NAMESPACE_SETUP_FAILED,
        "entering the working directory again",
        lambda: os.chdir(plan.working_directory),
    )


def _lay_resolver(plan: LaunchPlan) -> list[int]:
    """With --allow-dns, the laid files opened for Landlock read rules: no /etc grant needed."""
    if plan.resolver is None:
        return []
    resolver = plan.resolver
    try:
        laid = lay_resolver_files(resolver)
    except OSError as exc:
        raise StageFailure(
            FailureReason.NAMESPACE_SETUP_FAILED,
            f"laying the --allow-dns resolver files: {exc.strerror}",
        ) from exc
    return [os.open(path, os.O_PATH | os.O_CLOEXEC) for path in laid]


def _drop_privileges(channels: Channels) -> None:
    try:
        degraded = drop_every_capability()
    except OSError as exc:
        raise StageFailure(FailureReason.CAPABILITIES, f"capset: {exc.strerror}") from exc
    for what in degraded:
        send_degraded(channels.report, what)
    # A new session has no controlling terminal, so the command cannot open
    # /dev/tty to inject input into the terminal sandbx was started from.
    os.setsid()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def _exec(plan: LaunchPlan, program_fd: int | None) -> None:
    environment = dict(plan.environment)
    try:
        if program_fd is not None:
            os.execve(program_fd, plan.argv, environment)
        else:
            os.execvpe(plan.argv[0], plan.argv, environment)
    except OSError as exc:
        raise StageFailure(
            FailureReason.EXEC_FAILED, f"{plan.argv[0]}: {exc.strerror} [{_errno_name(exc)}]"
        ) from exc


def _exit_if_supervisor_gone(lifeline: int) -> None:
    poller = select.poll()
    poller.register(lifeline, select.POLLIN)
    if poller.poll(0):
        os._exit(1)
    os.close(lifeline)


def _step(reason: FailureReason, what: str, action: Callable[[], None]) -> None:
    try:
        action()
    except OSError as exc:
        raise StageFailure(reason, f"{what}: {exc.strerror}") from exc


def _open_pinned_grant(rule: PathRule) -> int:
    grant = rule.grant
    return open_pinned(
        grant.path, device=grant.device, inode=grant.inode, on_procfs=grant.on_procfs
    )


def _apply_landlock(plan: LaunchPlan, rule_fds: list[int], resolver_fds: list[int]) -> None:
    try:
        ruleset = _landlock.create_ruleset(plan.handled)
        for rule, fd in zip(plan.path_rules, rule_fds, strict=True):
            if rule.rights:
                _landlock.add_path_rule(ruleset, fd, rule.rights)
            os.close(fd)
        for fd in resolver_fds:
            _landlock.add_path_rule(ruleset, fd, _landlock.FS_READ_FILE)
            os.close(fd)
        for port in plan.port_rules:
            _landlock.add_port_rule(
                ruleset, port, _landlock.NET_BIND_TCP | _landlock.NET_CONNECT_TCP
            )
        _landlock.restrict_self(ruleset)
    except OSError as exc:
        raise StageFailure(FailureReason.LANDLOCK, f"Landlock: {exc.strerror}") from exc


def _checked_pin(pin: Pin) -> int:
    try:
        fd = os.open(pin.program, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise StageFailure(
            FailureReason.PIN_REFUSED,
            f"{pin.program} cannot be read to check its digest: {exc.strerror}",
        ) from exc
    if starts_with_shebang(fd):
        raise StageFailure(FailureReason.PIN_REFUSED, f"{pin.program} is a #! script")
    found = sha256_of_fd(fd)
    if found != pin.sha256:
        raise StageFailure(
            FailureReason.PIN_MISMATCH,
            f"{pin.program} hashes to {found}, but --pin-sha256 expects {pin.sha256}",
        )
    return fd


def _errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, str(exc.errno))
