"""The spawner: a single-threaded process that runs commands for a caller that has threads.

Forking a process with threads is unsafe, and agent-run has them (an HTTP
client, a screen). So it starts this process first, before any thread exists,
with the run's policy already derived, and asks it for each command over a
pair of pipes. The spawner calls ``run_sandboxed`` itself; it never widens the
policy it was forked with, since it takes no policy from a request.
"""

from __future__ import annotations

import json
import os
import select
import signal

from sandbx.boundary._frames import ChannelClosed, receive_frame, send_frame
from sandbx.boundary._helper import HelperProcess
from sandbx.boundary._outcome import Exited, Failed, FailureReason, Outcome, RunResult
from sandbx.boundary._spawn import PreparedSandbox
from sandbx.policy import Policy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


class Spawner:
    """The caller's handle; ``run`` may be called from any thread, one run at a time."""

    def __init__(self, helper: HelperProcess) -> None:
        self._helper = helper

    @classmethod
    def start(cls, policy: Policy, *, prepare_ahead: bool = True) -> Spawner:
        """Fork the spawner. Call before the caller starts any thread.

        With ``prepare_ahead`` it keeps the next call's sandbox ready; without
        (no command is expected, since ``bash`` is not approved) it makes each
        when asked.
        """
        return cls(
            HelperProcess.fork(
                lambda requests, responses: _serve(
                    policy, requests, responses, prepare_ahead=prepare_ahead
                )
            )
        )

    def run(self, argv: tuple[str, ...], *, timeout_seconds: float, output_limit: int) -> RunResult:
        request = json.dumps(
            {"argv": list(argv), "timeout": timeout_seconds, "limit": output_limit},
            ensure_ascii=False,
        ).encode("utf-8", "surrogateescape")
        (answer,) = self._helper.exchange(request)
        header, _newline, output = answer.partition(b"\n")
        return _result_from(json.loads(header), output)

    def interrupt(self) -> None:
        """Kill the command now running, if any: it ends as ``interrupted``."""
        try:
            os.kill(self._helper.pid, signal.SIGINT)
        except ProcessLookupError:
            return

    def close(self) -> None:
        self._helper.close()


def _serve(policy: Policy, requests: int, responses: int, *, prepare_ahead: bool) -> NoReturn:
    code = 0
    ready = _Ready(policy, requests, keep=_KEEP_READY if prepare_ahead else 0)
    try:
        ready.top_up()
        while True:
            ready.top_up_when_idle()
            try:
                request = json.loads(receive_frame(requests))
            except ChannelClosed:
                break
            result = ready.take().run(
                tuple(request["argv"]),
                timeout_seconds=float(request["timeout"]),
                output_limit=int(request["limit"]),
            )
            send_frame(responses, _frame_of(result))
    except BaseException:  # noqa: BLE001 - nothing may escape a forked child
        code = 1
    finally:
        ready.discard()
        os._exit(code)


# Sandboxes kept prepared: one reply of the model may ask for several commands,
# and the second should not wait for its sandbox either.
_KEEP_READY = 2
# How long the spawner waits, after an answer, before preparing more: the
# caller's next request comes at once when one reply asked for several
# commands, and otherwise only after a model round, which takes far longer.
_IDLE_SECONDS = 0.005


class _Ready:
    """The prepared sandboxes, oldest first, made while no request waits."""

    def __init__(self, policy: Policy, requests: int, *, keep: int) -> None:
        self._policy = policy
        self._requests = requests
        self._keep = keep
        self._sandboxes: list[PreparedSandbox] = []

    def top_up(self) -> None:
        # Each clone holds this CPU for about a millisecond: none is started
        # while a request is already waiting.
        while len(self._sandboxes) < self._keep and not _readable(self._requests, 0):
            self._sandboxes.append(PreparedSandbox(self._policy))

    def top_up_when_idle(self) -> None:
        if len(self._sandboxes) < self._keep and not _readable(self._requests, _IDLE_SECONDS):
            self.top_up()

    def take(self) -> PreparedSandbox:
        """The oldest sandbox still current, or one made now."""
        while self._sandboxes:
            sandbox = self._sandboxes.pop(0)
            if sandbox.still_current():
                return sandbox
            sandbox.discard()
        return PreparedSandbox(self._policy)

    def discard(self) -> None:
        for sandbox in self._sandboxes:
            sandbox.discard()
        self._sandboxes.clear()


def _readable(fd: int, seconds: float) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(int(seconds * 1000)))


def _frame_of(result: RunResult) -> bytes:
    """One frame per answer: the JSON header (which holds no raw newline), a newline, the output."""
    return json.dumps(_header_of(result)).encode() + b"\n" + result.output


def _header_of(result: RunResult) -> dict[str, object]:
    outcome: dict[str, object]
    match result.outcome:
        case Exited(code=code):
            outcome = {"exited": code}
        case Failed(reason=reason, detail=detail, signal_number=number):
            outcome = {"failed": reason.value, "detail": detail, "signal": number}
    return {"outcome": outcome, "degraded": list(result.degraded), "dropped": result.output_dropped}


def _result_from(header: dict[str, object], output: bytes) -> RunResult:
    raw = header["outcome"]
    degraded = header["degraded"]
    if not isinstance(raw, dict) or not isinstance(degraded, list):
        msg = "the spawner answered with a malformed frame"
        raise ChannelClosed(msg)
    outcome: Outcome
    if "exited" in raw:
        outcome = Exited(int(raw["exited"]))
    else:
        outcome = Failed(
            FailureReason(str(raw["failed"])), str(raw["detail"]), signal_number=int(raw["signal"])
        )
    return RunResult(
        outcome,
        tuple(str(item) for item in degraded),
        output=output,
        output_dropped=int(str(header["dropped"])),
    )
