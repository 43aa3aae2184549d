"""What every tool shares: its outcome, the accesses it made, and the context it runs in.

A tool never decides what is granted: paths are checked lexically against the
run's roots here, and everything inside the roots is decided by the kernel in
the confined worker (or, for ``bash``, in the sandbox).
"""

from __future__ import annotations

import os

from sandbx._enum import Enum
from sandbx._value import value
from sandbx.policy import Access, Policy, is_within

OUTPUT_LIMIT = 256 * 1024


class ToolArgumentError(ValueError):
    """The model called a tool with arguments it does not take; the model is told."""


class AccessKind(Enum):
    ALLOWED = "allowed"
    ABSENT = "absent"
    DENIED = "denied"


@value
class FileAccess:
    """One access a file tool made, for the audit trail."""

    kind: AccessKind
    path: str
    access: str
    reason: str = ""


@value
class ToolOutcome:
    """What the model is told, whether it is an error, and what the trail records."""

    text: str
    is_error: bool = False
    accesses: tuple[FileAccess, ...] = ()
    # A one-line verdict for the stderr line sandbx prints per call ("ran", "refused …").
    verdict: str = "ran"
    # What the stderr line names: the absolute path a file tool was given.
    subject: str = ""

    def about(self, subject: str) -> ToolOutcome:
        return ToolOutcome(
            text=self.text,
            is_error=self.is_error,
            accesses=self.accesses,
            verdict=self.verdict,
            subject=subject,
        )


@value
class Roots:
    """The run's granted roots, for the lexical check made before any file system call."""

    readable: tuple[str, ...]
    writable: tuple[str, ...]
    working_directory: str

    @classmethod
    def of(cls, policy: Policy, working_directory: str) -> Roots:
        return cls(
            readable=tuple(grant.path for grant in policy.grants),
            writable=tuple(grant.path for grant in policy.grants if grant.access is Access.WRITE),
            working_directory=working_directory,
        )

    def absolute(self, path: str) -> str:
        """Lexically absolute: joined to the working directory and normalised, no link followed."""
        return os.path.normpath(os.path.join(self.working_directory, path))

    def readable_root_of(self, path: str) -> bool:
        return any(is_within(path, root) for root in self.readable)

    def writable_root_of(self, path: str) -> bool:
        return any(is_within(path, root) for root in self.writable)


def require_string(arguments: dict[str, object], name: str, *, empty_ok: bool = False) -> str:
    found = arguments.get(name)
    if not isinstance(found, str):
        msg = f"`{name}` must be a string"
        raise ToolArgumentError(msg)
    if not found and not empty_ok:
        msg = f"`{name}` must not be empty"
        raise ToolArgumentError(msg)
    if "\0" in found and name == "path":
        msg = "`path` must not contain a NUL byte"
        raise ToolArgumentError(msg)
    return found


def refused_outside(path: str, access: str, which: str) -> ToolOutcome:
    reason = f"outside every {which} root"
    return ToolOutcome(
        text=f"refused: {path} is {reason} of this run",
        is_error=True,
        accesses=(FileAccess(kind=AccessKind.DENIED, path=path, access=access, reason=reason),),
        verdict=f"refused by the policy: {reason}",
    )


def from_os_error(path: str, access: str, exc: OSError) -> ToolOutcome:
    """A kernel answer inside the roots: a missing name is ``absent``, anything else ``denied``."""
    if isinstance(exc, FileNotFoundError):
        return ToolOutcome(
            text=f"{path}: no such file or directory",
            is_error=True,
            accesses=(FileAccess(kind=AccessKind.ABSENT, path=path, access=access),),
            verdict="failed: no such file or directory",
        )
    reason = exc.strerror or type(exc).__name__
    return ToolOutcome(
        text=f"{path}: {reason}",
        is_error=True,
        accesses=(FileAccess(kind=AccessKind.DENIED, path=path, access=access, reason=reason),),
        verdict=f"refused by the kernel: {reason}",
    )


def allowed(path: str, access: str) -> tuple[FileAccess, ...]:
    return (FileAccess(kind=AccessKind.ALLOWED, path=path, access=access),)


def cap_marker(shown: int, total: int, unit: str) -> str:
    return f"\n[output cut: {shown} of {total} {unit} shown]"
