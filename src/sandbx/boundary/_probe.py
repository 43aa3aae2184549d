"""What this host can enforce, found by asking the kernel, for ``sandbx doctor``.

Each probe runs in a forked child that tries the real mechanism (a user
namespace, a mount inside one, a seccomp filter) and exits with a verdict, so
the caller is never changed by a probe.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from sandbx._value import value
from sandbx.boundary import _landlock
from sandbx.boundary._namespaces import SANDBOX_NAMESPACES, keep_mounts_private, map_caller
from sandbx.boundary._seccomp import FilterOptions, compile_filter, install, is_supported_machine
from sandbx.boundary._syscalls import (
    CLONE_NEWNS,
    CLONE_NEWUSER,
    MACHINE,
    PR_SET_NO_NEW_PRIVS,
    prctl,
    unshare,
)
from sandbx.boundary._syscalls import mount as mount_call


@value
class Probe:
    ok: bool
    detail: str


@value
class HostReport:
    kernel: str
    machine: str
    landlock_abi: int
    user_namespaces: Probe
    sandbox_namespaces: Probe
    userns_mount: Probe
    apparmor_userns_restriction: str
    seccomp_filter: Probe
    cgroup_v2_delegation: Probe


def probe_host() -> HostReport:
    return HostReport(
        kernel=os.uname().release,
        machine=MACHINE,
        landlock_abi=_landlock.abi_version(),
        user_namespaces=_in_child(_try_user_namespace),
        sandbox_namespaces=_in_child(_try_sandbox_namespaces),
        userns_mount=_in_child(_try_mount_in_user_namespace),
        apparmor_userns_restriction=_read_sysctl("kernel/apparmor_restrict_unprivileged_userns"),
        seccomp_filter=_in_child(_try_seccomp_filter)
        if is_supported_machine()
        else Probe(ok=False, detail=f"no syscall table for {MACHINE}"),
        cgroup_v2_delegation=_cgroup_v2_delegation(),
    )


def _in_child(attempt: Callable[[], None]) -> Probe:
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        verdict = 1
        try:
            os.close(read_end)
            attempt()
            verdict = 0
        except OSError as exc:
            os.write(write_end, f"{exc.strerror or exc}".encode())
        except BaseException as exc:  # noqa: BLE001 - nothing may escape a forked child
            os.write(write_end, repr(exc).encode())
        finally:
            os._exit(verdict)
    os.close(write_end)
    message = b""
    while chunk := os.read(read_end, 4096):
        message += chunk
    os.close(read_end)
    _pid, status = os.waitpid(pid, 0)
    ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    return Probe(ok=ok, detail="works" if ok else message.decode(errors="replace") or "failed")


def _try_user_namespace() -> None:
    unshare(CLONE_NEWUSER)


def _try_sandbox_namespaces() -> None:
    uid, gid = os.geteuid(), os.getegid()
    unshare(SANDBOX_NAMESPACES)
    map_caller(uid, gid)


def _try_mount_in_user_namespace() -> None:
    uid, gid = os.geteuid(), os.getegid()
    unshare(CLONE_NEWUSER | CLONE_NEWNS)
    map_caller(uid, gid)
    keep_mounts_private()
    mount_call("tmpfs", "/tmp", "tmpfs", 0)  # noqa: S108 - in a private mount namespace


def _try_seccomp_filter() -> None:
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    install(compile_filter(FilterOptions()))


def _read_sysctl(name: str) -> str:
    try:
        with open(f"/proc/sys/{name}", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return "absent"


def _cgroup_v2_delegation() -> Probe:
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        return Probe(ok=False, detail=f"/proc/self/cgroup: {exc.strerror}")
    unified = [line.split(":", 2)[2] for line in lines if line.startswith("0::")]
    if not unified:
        return Probe(ok=False, detail="no cgroup v2 hierarchy for this process")
    for mount_point in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if os.path.exists(os.path.join(mount_point, "cgroup.controllers")):
            directory = os.path.join(mount_point, unified[0].lstrip("/"))
            if os.access(directory, os.W_OK) and os.access(
                os.path.join(directory, "cgroup.procs"), os.W_OK
            ):
                return Probe(ok=True, detail=f"{directory} is writable")
            return Probe(ok=False, detail=f"{directory} is not writable by this user")
    return Probe(ok=False, detail="cgroup2 is not mounted")
