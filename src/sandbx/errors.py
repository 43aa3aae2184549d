"""The one exception tree of sandbx; every error a user can see is a leaf of it.

Each leaf is named for its condition and builds its own message: ``what`` went
wrong and ``hint``, the flag or action that would fix it. The CLI's top-level
wrapper is the only place that prints them. Foreign errors (``OSError`` from a
kernel call, a library's exceptions) are translated where they are caught.

    SandbxError
    ├── UsageError                      exit 64: the command line was not taken
    │   └── EnvironmentNameRefused
    ├── PolicyRefusal                   exit 1: sandbx declines to derive this policy
    │   ├── DerivedRootRefused
    │   ├── GrantReachesOwnedPath
    │   ├── GrantPathUnusable
    │   └── PinRefused
    └── HostError                       exit 1: the host could not do what was asked
"""

from __future__ import annotations

EX_USAGE = 64
EX_FAILURE = 1


class SandbxError(Exception):
    """A failure sandbx reports in one line: ``sandbx: <what> — <hint>``."""

    exit_code: int = EX_FAILURE

    def __init__(self, what: str, hint: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.hint = hint

    def one_line(self) -> str:
        flat_what = _single_line(self.what)
        if self.hint:
            return f"sandbx: {flat_what} — {_single_line(self.hint)}"
        return f"sandbx: {flat_what}"


class UsageError(SandbxError):
    """The command line itself is wrong; nothing was derived or spawned."""

    exit_code = EX_USAGE


class EnvironmentNameRefused(UsageError):
    def __init__(self, name: str, why: str) -> None:
        super().__init__(
            f"--allow-env {name!r} refused: {why}",
            "pass only the variable's NAME; the command gets the value sandbx itself holds",
        )


class PolicyRefusal(SandbxError):
    """A grant or a derived root sandbx will not put into a policy."""


class DerivedRootRefused(PolicyRefusal):
    def __init__(self, description: str, path: str) -> None:
        super().__init__(
            f"refusing to derive a policy from {description} {path}",
            "pass --allow-read PATH and --allow-write PATH for the tree the command needs",
        )


class GrantReachesOwnedPath(PolicyRefusal):
    def __init__(self, flag: str, path: str, owned: str, owned_kind: str) -> None:
        super().__init__(
            f"{flag} {path} refused: it reaches sandbx's own {owned_kind} {owned}",
            "grant a narrower path; no flag lets a command reach sandbx's session store "
            "or credential file",
        )


class GrantPathUnusable(PolicyRefusal):
    def __init__(self, flag: str, path: str, why: str, hint: str = "") -> None:
        super().__init__(
            f"{flag} {path} refused: {why}", hint or "grant a path that exists and you can reach"
        )


class PinRefused(PolicyRefusal):
    def __init__(self, program: str, why: str, hint: str) -> None:
        super().__init__(f"--pin-sha256 refused for {program}: {why}", hint)


class HostError(SandbxError):
    """Something on this host failed outside the command: a file, a kernel call."""


def _single_line(text: str) -> str:
    # A path may hold a newline; shown escaped, it still names the same path.
    return text.replace("\r", "\\r").replace("\n", "\\n")
