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
import signal

from sandbx.boundary._frames import ChannelClosed, receive_frame, send_frame
from sandbx.boundary._helper import HelperProcess
from sandbx.boundary._outcome import Exited, Failed, FailureReason, Outcome, RunResult
from sandbx.boundary._spawn import PreparedSandbox
from sandbx.boundary._supervisor import INTERRUPTING_SIGNALS
from sandbx.boundary._syscalls import PR_SET_PDEATHSIG, prctl
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
                lambda requests, responses, parent: _serve(
                    policy, requests, responses, parent, prepare_ahead=prepare_ahead
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


def _serve(
    policy: Policy, requests: int, responses: int, parent: int, *, prepare_ahead: bool
) -> NoReturn:
    code = 0
    prepared: PreparedSandbox | None = None
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)
        # Idle, a terminal's ctrl-c must not end the spawner; during a run the
        # supervisor blocks these signals and ends the run on them instead.
        for signal_number in INTERRUPTING_SIGNALS:
            signal.signal(signal_number, signal.SIG_IGN)
        prepared = PreparedSandbox(policy) if prepare_ahead else None
        while True:
            try:
                request = json.loads(receive_frame(requests))
            except ChannelClosed:
                break
            if prepared is not None and not prepared.still_current():
                prepared.discard()
                prepared = None
            if prepared is None:
                prepared = PreparedSandbox(policy)
            result = prepared.run(
                tuple(request["argv"]),
                timeout_seconds=float(request["timeout"]),
                output_limit=int(request["limit"]),
            )
            # The next sandbox is cloned once this answer is on its way: it
            # confines itself while the caller goes back to the model.
            prepared = None
            send_frame(responses, _frame_of(result))
            if prepare_ahead:
                # A pipe write wakes its reader as a synchronous wake-up, on
                # this CPU, expecting the writer to sleep; the clone would hold
                # the CPU for about a millisecond before the caller got its
                # answer. Yield first, so the caller takes it.
                os.sched_yield()
                prepared = PreparedSandbox(policy)
    except BaseException:  # noqa: BLE001 - nothing may escape a forked child
        code = 1
    finally:
        if prepared is not None:
            prepared.discard()
        os._exit(code)


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
