"""How a sandboxed run ended, and the one-line messages its stages send home.

The sandboxed child reports over a close-on-exec pipe, one short line per
message (shorter than PIPE_BUF, so each write is atomic). A failure carries a
label from the closed set ``FailureReason``; nothing else crosses.
"""

from __future__ import annotations

import os

from sandbx._enum import Enum
from sandbx._exhaustive import unreachable
from sandbx._fdio import write_text
from sandbx._value import value


class FailureReason(Enum):
    """Why a run was refused or cut short: the ``reason=`` of a ``failed`` record."""

    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"
    UNSUPPORTED = "unsupported"
    LANDLOCK = "landlock"
    SECCOMP = "seccomp"
    CAPABILITIES = "capabilities"
    NAMESPACE_SETUP_FAILED = "namespace_setup_failed"
    GRANT_REPLACED = "grant_replaced"
    GRANT_REDIRECTED = "grant_redirected"
    PIN_MISMATCH = "pin_mismatch"
    PIN_REFUSED = "pin_refused"
    EXEC_FAILED = "exec_failed"
    SPAWN_FAILED = "spawn_failed"


class StageFailure(Exception):
    """Raised inside a stage to refuse the run: becomes one ``failed`` message."""

    def __init__(self, reason: FailureReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@value(kw_only=False)
class Exited:
    """The command ran and ended; a death by signal n is code 128+n, as shells report it."""

    code: int


@value(kw_only=False)
class Failed:
    reason: FailureReason
    detail: str
    signal_number: int = 0

    @property
    def exit_code(self) -> int:
        # An interrupt is relayed the way a shell would report the same signal.
        if self.reason is FailureReason.INTERRUPTED and self.signal_number:
            return 128 + self.signal_number
        return 1


Outcome = Exited | Failed


@value(kw_only=False)
class RunResult:
    outcome: Outcome
    degraded: tuple[str, ...]
    # With a capture: the command's stdout and stderr, interleaved as written,
    # up to the limit; and how many bytes past it were read and dropped.
    output: bytes = b""
    output_dropped: int = 0

    @property
    def exit_code(self) -> int:
        match self.outcome:
            case Exited(code=code):
                return code
            case Failed() as failed:
                return failed.exit_code
            case _:
                raise unreachable(self.outcome)


def exit_code_of(wait_status: int) -> int:
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return os.waitstatus_to_exitcode(wait_status)


def _clean(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())[:1000]


def send_failed(fd: int, reason: FailureReason, detail: str) -> None:
    _send(fd, f"failed\t{reason.value}\t{_clean(detail)}")


def send_degraded(fd: int, what: str) -> None:
    _send(fd, f"degraded\t{_clean(what)}")


def _send(fd: int, line: str) -> None:
    # When the reader is gone, the CLI died and this process follows it by its
    # parent-death signal: there is nobody left to tell.
    write_text(fd, line + "\n")


def decode(stream: bytes) -> tuple[Failed | None, tuple[str, ...]]:
    """The child's messages: the first failure it reported, and what it could only degrade."""
    degraded: list[str] = []
    failure: Failed | None = None
    for raw in stream.decode("utf-8", "replace").splitlines():
        kind, _, rest = raw.partition("\t")
        if kind == "degraded":
            degraded.append(rest)
        elif kind == "failed" and failure is None:
            label, _, detail = rest.partition("\t")
            failure = Failed(_reason(label), detail)
    return failure, tuple(degraded)


def _reason(label: str) -> FailureReason:
    try:
        return FailureReason(label)
    except ValueError:
        return FailureReason.SPAWN_FAILED
