"""Emptying every capability set before the command runs.

Inside its user namespace the sandbox starts with every capability; they are
needed for its mounts and gone before Landlock and seccomp are applied. Order
matters (capabilities(7)): the bounding set and securebits need CAP_SETPCAP,
so they go before ``capset`` empties the permitted set.
"""

from __future__ import annotations

import ctypes
import errno

from sandbx.boundary._syscalls import (
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_SET_SECUREBITS,
    address_of,
    capset_syscall_number,
    prctl,
    syscall,
)

# include/uapi/linux/capability.h
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

# include/uapi/linux/securebits.h: root gains nothing by uid 0 or by setuid,
# no ambient raise, each bit locked so the command cannot undo it.
_SECBIT_NOROOT = 1 << 0
_SECBIT_NOROOT_LOCKED = 1 << 1
_SECBIT_NO_SETUID_FIXUP = 1 << 2
_SECBIT_NO_SETUID_FIXUP_LOCKED = 1 << 3
_SECBIT_KEEP_CAPS_LOCKED = 1 << 5
_SECBIT_NO_CAP_AMBIENT_RAISE = 1 << 6
_SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED = 1 << 7
LOCKED_SECUREBITS = (
    _SECBIT_NOROOT
    | _SECBIT_NOROOT_LOCKED
    | _SECBIT_NO_SETUID_FIXUP
    | _SECBIT_NO_SETUID_FIXUP_LOCKED
    | _SECBIT_KEEP_CAPS_LOCKED
    | _SECBIT_NO_CAP_AMBIENT_RAISE
    | _SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED
)


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def drop_every_capability() -> list[str]:
    """Empty all five sets; return what could only be done in part (a ``degraded`` each)."""
    degraded: list[str] = []
    capability = 0
    while True:
        try:
            prctl(PR_CAPBSET_DROP, capability)
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                break  # past the last capability this kernel knows
            degraded.append(f"bounding set: capability {capability} kept ({exc.strerror})")
        capability += 1
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError as exc:
        degraded.append(f"ambient set not cleared ({exc.strerror})")
    try:
        prctl(PR_SET_SECUREBITS, LOCKED_SECUREBITS)
    except OSError as exc:
        degraded.append(f"securebits not locked ({exc.strerror})")
    header = _CapHeader(version=_LINUX_CAPABILITY_VERSION_3, pid=0)
    data = (_CapData * 2)()
    syscall(capset_syscall_number(), address_of(header), ctypes.c_void_p(ctypes.addressof(data)))
    return degraded
