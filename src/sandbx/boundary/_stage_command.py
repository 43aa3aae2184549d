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
import gc
import os
import resource
import select

from sandbx.boundary._capabilities import drop_every_capability
from sandbx.boundary._namespaces import keep_mounts_private, mount_own_proc, write_id_maps
from sandbx.boundary._outcome import FailureReason, StageFailure, send_degraded, send_failed
from sandbx.boundary._plan import Channels, Confinement, LaunchPlan
from sandbx.boundary._resolver import lay_resolver_files
from sandbx.boundary._signals import SIGHUP, SIGINT, SIGKILL, SIGPIPE, SIGQUIT, SIGTERM, SIGXFSZ
from sandbx.boundary._syscalls import (
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    SIG_SETMASK,
    SignalSet,
    close_range_cloexec,
    prctl,
    set_disposition,
    set_signal_mask,
)
from sandbx.policy import Pin, sha256_of_fd, starts_with_shebang

# Ignored by the Python runtime; an ignored signal would survive execve(2).
_IGNORED_BY_PYTHON = (SIGPIPE, SIGXFSZ)
# Signals a terminal or sandbx's own caller sends; the supervisor answers them.
# Until the child has its own session it shares the caller's process group, so
# it ignores them (dropping any that came while they were blocked for the
# clone): a ctrl-c meant for the agent must not kill the sandbox the spawner is
# preparing. They go back to the default just before the command starts.
_SENT_TO_THE_GROUP = (SIGINT, SIGTERM, SIGHUP, SIGQUIT)

_NO_SIGNALS = SignalSet()

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn, ParamSpec

    _P = ParamSpec("_P")


def run_command_stage(plan: LaunchPlan, channels: Channels) -> NoReturn:
    try:
        _confine_and_exec(plan, channels)
    except StageFailure as failure:
        send_failed(channels.report, failure.reason, failure.detail)
    except BaseException as exc:  # noqa: BLE001 - nothing may escape a forked child
        send_failed(channels.report, FailureReason.SPAWN_FAILED, f"command stage: {exc!r}")
    finally:
        os._exit(127)


def _confine_and_exec(plan: LaunchPlan, channels: Channels) -> None:
    # A collection would write to every object it walks, and each page written
    # here is a copy-on-write fault; the child lives a millisecond and execs.
    gc.disable()
    prctl(PR_SET_PDEATHSIG, SIGKILL)
    _exit_if_supervisor_gone(channels.report)
    for signal_number in _IGNORED_BY_PYTHON:
        set_disposition(signal_number, ignored=False)
    for signal_number in _SENT_TO_THE_GROUP:
        set_disposition(signal_number, ignored=True)
    set_signal_mask(SIG_SETMASK, _NO_SIGNALS)
    for fd, standard in ((channels.stdin, 0), (channels.stdout, 1), (channels.stderr, 2)):
        if fd is not None:
            os.dup2(fd, standard)
    confinement = plan.confinement
    _step(FailureReason.NAMESPACE_SETUP_FAILED, "mapping the caller's ids", _map_ids, confinement)
    _set_up_mounts(plan)
    rule_fds = confinement.ruleset.open_paths()
    resolver_fds = _lay_resolver(confinement)
    _drop_privileges(channels)
    _step(FailureReason.LANDLOCK, "Landlock", confinement.ruleset.enforce, rule_fds, resolver_fds)
    program_fd = None if confinement.pin is None else _checked_pin(confinement.pin)
    _step(FailureReason.SECCOMP, "installing the seccomp filter", confinement.seccomp.install)
    argv = plan.argv if channels.command is None else _await_command(channels.command)
    for signal_number in _SENT_TO_THE_GROUP:
        set_disposition(signal_number, ignored=False)
    close_range_cloexec(3)
    _exec(argv, confinement.environment, program_fd)


def _map_ids(confinement: Confinement) -> None:
    # A non-dumpable process's /proc/self files belong to root, so the id maps
    # could not be written; the child is dumpable only for these writes.
    prctl(PR_SET_DUMPABLE, 1)
    write_id_maps(confinement.id_maps)
    prctl(PR_SET_DUMPABLE, 0)


def _set_up_mounts(plan: LaunchPlan) -> None:
    confinement = plan.confinement
    keep_mounts_private()
    if confinement.mount_proc:
        _step(FailureReason.NAMESPACE_SETUP_FAILED, "mounting the sandbox's /proc", mount_own_proc)
    _step(
        FailureReason.NAMESPACE_SETUP_FAILED,
        "making mounts read-only and no-exec outside the grants",
        confinement.mounts.apply,
    )
    # The working directory still names the mount it was entered through; a
    # write grant's new mount covers it only once the path is resolved again.
    _step(
        FailureReason.NAMESPACE_SETUP_FAILED,
        "entering the working directory again",
        os.chdir,
        plan.working_directory,
    )


def _lay_resolver(confinement: Confinement) -> list[int]:
    """With --allow-dns, the laid files opened for Landlock read rules: no /etc grant needed."""
    if confinement.resolver is None:
        return []
    try:
        laid = lay_resolver_files(confinement.resolver)
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


def _await_command(command: int) -> tuple[str, ...]:
    """A prepared sandbox, fully confined, waits here for its command: NUL-separated words
    up to end of file. End of file before any word means it was discarded."""
    received = bytearray()
    while chunk := os.read(command, 65536):
        received += chunk
    if not received:
        os._exit(0)
    return tuple(os.fsdecode(word) for word in bytes(received).split(b"\0"))


def _exec(argv: tuple[str, ...], environment: dict[str, str], program_fd: int | None) -> None:
    try:
        if program_fd is not None:
            os.execve(program_fd, argv, environment)
        else:
            os.execvpe(argv[0], argv, environment)
    except OSError as exc:
        raise StageFailure(
            FailureReason.EXEC_FAILED, f"{argv[0]}: {exc.strerror} [{_errno_name(exc)}]"
        ) from exc


def _exit_if_supervisor_gone(report: int) -> None:
    """Leave if sandbx died before the parent-death signal was armed.

    The child is PID 1 of its namespace, so getppid() tells it nothing. But
    sandbx holds the only read end of the report pipe (the child closed its
    copy), and poll(2) flags a pipe's write end with POLLERR once no reader is left.
    """
    poller = select.poll()
    poller.register(report, 0)
    if poller.poll(0):
        os._exit(1)


def _step(
    reason: FailureReason,
    what: str,
    action: Callable[_P, object],
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> None:
    try:
        action(*args, **kwargs)
    except OSError as exc:
        raise StageFailure(reason, f"{what}: {exc.strerror}") from exc


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
