"""Mount flags as a second wall behind Landlock: read-only and no-exec outside the grants.

Landlock does not govern chmod, chown, utimes or extended attributes, nor
code mapped by the dynamic loader (``ld.so ./program`` needs only read access;
landlock(7), "Current limitations"). Mount flags do: a read-only mount refuses
the first with EROFS, and a no-exec mount refuses execve and PROT_EXEC mappings.
So in the sandbox's private mount namespace every mount becomes read-only and
no-exec, then each grant root gets a mount of its own whose flags match what
the grants covering it allow: writable under a write grant, executable under an
exec grant (the same union Landlock applies).
"""

from __future__ import annotations

import ctypes
import os

from sandbx._value import value
from sandbx.boundary._pinned import PinnedPath
from sandbx.boundary._syscalls import c_buffer, syscall, syscall_longs
from sandbx.policy import Access, VettedGrant, is_within

# The new mount API, the same numbers on every architecture (include/uapi/asm-generic/unistd.h).
_SYS_OPEN_TREE = 428
_SYS_MOVE_MOUNT = 429
_SYS_MOUNT_SETATTR = 442
# include/uapi/linux/mount.h and fcntl.h
_OPEN_TREE_CLONE = 1
_MOVE_MOUNT_F_EMPTY_PATH = 0x00000004
_MOVE_MOUNT_T_SYMLINKS = 0x00000010
_MOVE_MOUNT_T_EMPTY_PATH = 0x00000040
MOUNT_ATTR_RDONLY = 0x00000001
MOUNT_ATTR_NOSUID = 0x00000002
MOUNT_ATTR_NODEV = 0x00000004
MOUNT_ATTR_NOEXEC = 0x00000008
_AT_FDCWD = -100
_AT_EMPTY_PATH = 0x1000
_AT_RECURSIVE = 0x8000


@value
class MountSpec:
    """One grant root's own mount: what the grants covering it allow."""

    path: str
    device: int
    inode: int
    writable: bool
    executable: bool


def mount_specs(grants: tuple[VettedGrant, ...]) -> tuple[MountSpec, ...]:
    """One spec per grant root whose flags differ from those it would inherit.

    Parents come before children, so nested mounts stack. A root that would get
    the very flags of the mount above it (``/usr/bin`` under ``/usr``) needs no
    mount of its own: every mount costs the spawn tens of microseconds.
    """
    roots = {grant.path: grant for grant in grants if not grant.on_procfs}
    specs: list[MountSpec] = []
    for root in sorted(roots, key=_depth):
        covering = [grant.access for grant in grants if is_within(root, grant.path)]
        writable = Access.WRITE in covering
        executable = Access.EXECUTE in covering
        above = [spec for spec in specs if is_within(root, spec.path)]
        inherited = (above[-1].writable, above[-1].executable) if above else (False, False)
        if (writable, executable) == inherited:
            continue
        specs.append(
            MountSpec(
                path=root,
                device=roots[root].device,
                inode=roots[root].inode,
                writable=writable,
                executable=executable,
            )
        )
    return tuple(specs)


def _depth(path: str) -> tuple[int, str]:
    return (path.count("/"), path)


class _MountAttr(ctypes.Structure):
    """``struct mount_attr``, include/uapi/linux/mount.h."""

    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


_MOUNT_ATTR_SIZE = ctypes.sizeof(_MountAttr)
_EMPTY_PATH_BUFFER, _EMPTY_PATH = c_buffer(b"")


class PreparedMounts:
    """The mount calls for a set of specs, with every buffer built before the fork."""

    def __init__(self, specs: tuple[MountSpec, ...]) -> None:
        self._root, self._root_address = _attributes(
            set_flags=MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID
        )
        self._c_root, self._c_root_address = c_buffer(b"/")
        self._steps = tuple(_PreparedSpec(spec) for spec in specs)

    def apply(self) -> None:
        """Needs CAP_SYS_ADMIN in the sandbox's user namespace; run before capabilities go."""
        syscall_longs(
            _SYS_MOUNT_SETATTR,
            _AT_FDCWD,
            self._c_root_address,
            _AT_RECURSIVE,
            self._root_address,
            _MOUNT_ATTR_SIZE,
        )
        for step in self._steps:
            step.apply()


class _PreparedSpec:
    __slots__ = ("_both", "_both_address", "_kept", "_kept_address", "_place")

    def __init__(self, spec: MountSpec) -> None:
        self._place = PinnedPath(spec.path, device=spec.device, inode=spec.inode)
        kept = (0 if spec.writable else MOUNT_ATTR_RDONLY) | (
            0 if spec.executable else MOUNT_ATTR_NOEXEC
        )
        cleared = (MOUNT_ATTR_RDONLY if spec.writable else 0) | (
            MOUNT_ATTR_NOEXEC if spec.executable else 0
        )
        self._both, self._both_address = _attributes(set_flags=kept, clear_flags=cleared)
        self._kept, self._kept_address = _attributes(set_flags=kept)

    def apply(self) -> None:
        # Opened again for each spec, after its parents were mounted, so that a
        # nested root is found through its parent's new mount; by descriptor, so
        # nothing is resolved twice. Raises StageFailure for a root that moved.
        place = self._place.open()
        try:
            tree = syscall_longs(
                _SYS_OPEN_TREE,
                place,
                _EMPTY_PATH,
                _OPEN_TREE_CLONE | os.O_CLOEXEC | _AT_RECURSIVE | _AT_EMPTY_PATH,
            )
        except OSError:
            os.close(place)
            raise
        try:
            flags = _AT_EMPTY_PATH | _AT_RECURSIVE
            try:
                syscall_longs(
                    _SYS_MOUNT_SETATTR,
                    tree,
                    _EMPTY_PATH,
                    flags,
                    self._both_address,
                    _MOUNT_ATTR_SIZE,
                )
            except PermissionError:
                # Where the host mounted this read-only or no-exec and locked the
                # flag (a mount inherited into a less privileged user namespace),
                # clearing it fails with EPERM: it stays as the host has it, and
                # only the flags to add are set.
                syscall_longs(
                    _SYS_MOUNT_SETATTR,
                    tree,
                    _EMPTY_PATH,
                    flags,
                    self._kept_address,
                    _MOUNT_ATTR_SIZE,
                )
            syscall_longs(
                _SYS_MOVE_MOUNT,
                tree,
                _EMPTY_PATH,
                place,
                _EMPTY_PATH,
                _MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH,
            )
        finally:
            os.close(tree)
            os.close(place)


def _attributes(*, set_flags: int = 0, clear_flags: int = 0) -> tuple[_MountAttr, int]:
    attr = _MountAttr(attr_set=set_flags, attr_clr=clear_flags, propagation=0, userns_fd=0)
    return attr, ctypes.addressof(attr)


def attach_clone(
    source_dir: int,
    name: str,
    target: str,
    *,
    set_flags: int,
    follow_target_symlinks: bool = False,
) -> None:
    """Bind ``name`` under ``source_dir`` over ``target``, with ``set_flags`` on the new mount."""
    tree = syscall(_SYS_OPEN_TREE, source_dir, os.fsencode(name), _OPEN_TREE_CLONE | os.O_CLOEXEC)
    try:
        _attr, address = _attributes(set_flags=set_flags)
        syscall_longs(
            _SYS_MOUNT_SETATTR, tree, _EMPTY_PATH, _AT_EMPTY_PATH, address, _MOUNT_ATTR_SIZE
        )
        move_mount_to(tree, target, follow_target_symlinks=follow_target_symlinks)
    finally:
        os.close(tree)


def move_mount_to(tree: int, target: str, *, follow_target_symlinks: bool = False) -> None:
    """Attach the detached mount ``tree`` over the path ``target``."""
    syscall(
        _SYS_MOVE_MOUNT,
        tree,
        b"",
        _AT_FDCWD,
        os.fsencode(target),
        _MOVE_MOUNT_F_EMPTY_PATH | (_MOVE_MOUNT_T_SYMLINKS if follow_target_symlinks else 0),
    )
