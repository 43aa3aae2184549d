"""Landlock: the ABI negotiation, the rights each grant axis maps to, and the ruleset.

Constants are from the kernel's ``include/uapi/linux/landlock.h`` (6.12+); the
ABI that introduced each is noted beside it, because the headers installed on
most hosts predate the network, ioctl and scoping rights. A ruleset handles
every right the running ABI knows, so whatever is not granted is denied.
"""

from __future__ import annotations

import ctypes
import os

from sandbx._value import value
from sandbx.boundary._pinned import PinnedPath
from sandbx.boundary._syscalls import (
    SYS_LANDLOCK_ADD_RULE,
    SYS_LANDLOCK_CREATE_RULESET,
    SYS_LANDLOCK_RESTRICT_SELF,
    syscall,
    syscall_longs,
)
from sandbx.policy import Access, Network, NetworkKind

MINIMUM_ABI = 5
SCOPING_ABI = 6

LANDLOCK_CREATE_RULESET_VERSION = 1 << 0
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_RULE_NET_PORT = 2

# Filesystem rights, ABI 1 unless noted.
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5

# Network rights, ABI 4.
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1

# Scopes, ABI 6.
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

_FS_RIGHTS_BY_ABI = {
    1: (1 << 13) - 1,
    2: FS_REFER,
    3: FS_TRUNCATE,
    5: FS_IOCTL_DEV,
}

# Changes to a directory's entries: creating, removing, linking or moving in.
_DIRECTORY_CHANGES = (
    FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_CHAR
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SOCK
    | FS_MAKE_FIFO
    | FS_MAKE_BLOCK
    | FS_MAKE_SYM
    | FS_REFER
)
# Rights that only make sense on a directory; landlock_add_rule(2) refuses them
# (EINVAL) in a rule whose parent_fd is a file.
_DIRECTORY_ONLY = FS_READ_DIR | _DIRECTORY_CHANGES

_READ = FS_READ_FILE | FS_READ_DIR
_WRITE = _READ | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV | _DIRECTORY_CHANGES
_EXECUTE = _READ | FS_EXECUTE


class RulesetAttr(ctypes.Structure):
    """``struct landlock_ruleset_attr``; the kernel reads only the size we pass."""

    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class PathBeneathAttr(ctypes.Structure):
    """``struct landlock_path_beneath_attr``, declared ``__attribute__((packed))``."""

    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class NetPortAttr(ctypes.Structure):
    """``struct landlock_net_port_attr``."""

    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


@value
class Handled:
    """What a ruleset on this ABI takes charge of."""

    abi: int
    fs: int
    net: int
    scoped: int


def abi_version() -> int:
    """The running kernel's Landlock ABI, or 0 where Landlock is absent or disabled."""
    try:
        return syscall(SYS_LANDLOCK_CREATE_RULESET, 0, 0, LANDLOCK_CREATE_RULESET_VERSION)
    except OSError:
        return 0


def handled_for(abi: int) -> Handled:
    fs = 0
    for introduced, rights in _FS_RIGHTS_BY_ABI.items():
        if abi >= introduced:
            fs |= rights
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= SCOPING_ABI else 0
    return Handled(abi=abi, fs=fs, net=net, scoped=scoped)


def handled_for_run(abi: int, network: Network) -> Handled:
    """What this run's ruleset handles: TCP is left alone under bare ``--allow-network``,
    and abstract Unix sockets under ``--allow-unix-sockets``."""
    base = handled_for(abi)
    return Handled(
        abi=abi,
        fs=base.fs,
        net=0 if network.kind is NetworkKind.ANY else base.net,
        scoped=base.scoped & ~SCOPE_ABSTRACT_UNIX_SOCKET if network.unix_sockets else base.scoped,
    )


def rights_for(access: Access, *, is_directory: bool, handled: Handled) -> int:
    match access:
        case Access.READ:
            rights = _READ
        case Access.WRITE:
            rights = _WRITE
        case Access.EXECUTE:
            rights = _EXECUTE
    if not is_directory:
        rights &= ~_DIRECTORY_ONLY
    return rights & handled.fs


class PreparedRuleset:
    """One ruleset's calls, with every struct built before the fork.

    ``open_paths`` pins each granted path to a descriptor (it must run while
    the sandbox can still see them all, before capabilities go); ``enforce``
    hands the rules to the kernel and restricts the calling process.
    """

    def __init__(
        self,
        handled: Handled,
        path_rules: tuple[tuple[PinnedPath, int], ...],
        ports: tuple[int, ...] = (),
    ) -> None:
        self._attr = RulesetAttr(
            handled_access_fs=handled.fs, handled_access_net=handled.net, scoped=handled.scoped
        )
        # ABI < 6 kernels reject a larger struct whose extra fields are non-zero and
        # accept the shorter one, so pass only the part this ABI knows.
        self._attr_size = (
            ctypes.sizeof(self._attr) if handled.abi >= SCOPING_ABI else RulesetAttr.scoped.offset
        )
        self._paths = tuple(pinned for pinned, _rights in path_rules)
        self._path_attrs = tuple(
            PathBeneathAttr(allowed_access=rights, parent_fd=-1) for _pinned, rights in path_rules
        )
        self._read_file = PathBeneathAttr(allowed_access=FS_READ_FILE, parent_fd=-1)
        self._ports = tuple(
            NetPortAttr(allowed_access=NET_BIND_TCP | NET_CONNECT_TCP, port=port) for port in ports
        )

    def open_paths(self) -> list[int]:
        """One pinned descriptor per path rule; raises ``StageFailure`` for one that moved."""
        return [pinned.open() for pinned in self._paths]

    def enforce(self, path_fds: list[int], read_file_fds: list[int]) -> None:
        """Restrict this process; closes the descriptors. Needs no_new_privs first."""
        ruleset = syscall_longs(
            SYS_LANDLOCK_CREATE_RULESET, ctypes.addressof(self._attr), self._attr_size, 0
        )
        try:
            for attr, fd in zip(self._path_attrs, path_fds, strict=True):
                if attr.allowed_access:
                    attr.parent_fd = fd
                    _add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, attr)
                os.close(fd)
            for fd in read_file_fds:
                self._read_file.parent_fd = fd
                _add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, self._read_file)
                os.close(fd)
            for port_attr in self._ports:
                _add_rule(ruleset, LANDLOCK_RULE_NET_PORT, port_attr)
            syscall_longs(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0)
        finally:
            os.close(ruleset)


def _add_rule(ruleset: int, kind: int, attr: ctypes.Structure) -> None:
    syscall_longs(SYS_LANDLOCK_ADD_RULE, ruleset, kind, ctypes.addressof(attr), 0)
