"""Emptying every capability set before the command runs.

Inside its user namespace the sandbox starts with every capability; they are
needed for its mounts and gone before Landlock and seccomp are applied. Order
matters (capabilities(7)): the bounding set and securebits need CAP_SETPCAP,
so they go before ``capset`` empties the permitted set.
"""

from __future__ import annotations

import ctypes
import errno
import os

from sandbx.boundary._syscalls import (
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_SET_SECUREBITS,
    capset_syscall_number,
    prctl_errno,
    syscall_longs,
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


# capset(2) with both data words zero: every set empty. Built once; the kernel only reads it.
_HEADER = _CapHeader(version=_LINUX_CAPABILITY_VERSION_3, pid=0)
_EMPTY = (_CapData * 2)()
_HEADER_ADDRESS = ctypes.addressof(_HEADER)
_EMPTY_ADDRESS = ctypes.addressof(_EMPTY)
# Past the last capability the kernel knows, PR_CAPBSET_DROP fails with EINVAL.
_MOST_CAPABILITIES = 64


def drop_every_capability() -> list[str]:
    """Empty all five sets; return what could only be done in part (a ``degraded`` each)."""
    degraded: list[str] = []
    for capability in range(_MOST_CAPABILITIES):
        failure = prctl_errno(PR_CAPBSET_DROP, capability)
        if failure == errno.EINVAL:
            break
        if failure:
            degraded.append(f"bounding set: capability {capability} kept ({os.strerror(failure)})")
    failure = prctl_errno(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    if failure:
        degraded.append(f"ambient set not cleared ({os.strerror(failure)})")
    failure = prctl_errno(PR_SET_SECUREBITS, LOCKED_SECUREBITS)
    if failure:
        degraded.append(f"securebits not locked ({os.strerror(failure)})")
    syscall_longs(capset_syscall_number(), _HEADER_ADDRESS, _EMPTY_ADDRESS)
    return degraded
