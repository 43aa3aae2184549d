"""The confined worker: where the file tools touch the file system, under the run's Landlock rules.

A process forked before the caller has threads, which confines itself (no new
privileges, the policy's Landlock ruleset without execute, TCP and scoping
denied, seccomp refusing exec, process creation and every socket) and then
answers requests with a handler the caller supplies. So a file tool reaches
exactly what a command could, however the path was spelled or linked.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from sandbx.boundary import _landlock, _seccomp
from sandbx.boundary._frames import ChannelClosed, receive_frame, send_frame
from sandbx.boundary._helper import HelperProcess
from sandbx.boundary._outcome import StageFailure
from sandbx.boundary._pinned import PinnedPath
from sandbx.boundary._syscalls import PR_SET_NO_NEW_PRIVS, prctl
from sandbx.policy import Access, Network, Policy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

Handler = Callable[[bytes], bytes]


class WorkerUnavailable(RuntimeError):
    """The worker could not confine itself, or died; no file tool may run without it."""


class FileWorker:
    """The caller's handle; ``call`` may be used from any thread, one request at a time."""

    def __init__(self, helper: HelperProcess) -> None:
        self._helper = helper

    @classmethod
    def start(cls, policy: Policy, handler: Handler) -> FileWorker:
        """Fork the worker and wait until it is confined. Call before any thread exists."""
        helper = HelperProcess.fork(
            lambda requests, responses: _serve(policy, handler, requests, responses)
        )
        try:
            greeting = helper.receive()
        except ChannelClosed:
            greeting = b"the worker died before confining itself"
        if greeting != b"confined":
            helper.close()
            raise WorkerUnavailable(greeting.decode("utf-8", "replace"))
        return cls(helper)

    def call(self, request: bytes) -> bytes:
        try:
            (response,) = self._helper.exchange(request)
        except (ChannelClosed, BrokenPipeError) as exc:
            msg = "the confined file worker has gone"
            raise WorkerUnavailable(msg) from exc
        return response

    def close(self) -> None:
        self._helper.close()


def _serve(policy: Policy, handler: Handler, requests: int, responses: int) -> NoReturn:
    code = 0
    try:
        try:
            _confine(policy)
        except (OSError, StageFailure) as exc:
            send_frame(responses, f"the file worker could not confine itself: {exc}".encode())
            os._exit(1)
        send_frame(responses, b"confined")
        while True:
            try:
                request = receive_frame(requests)
            except ChannelClosed:
                break
            send_frame(responses, handler(request))
    except BaseException:  # noqa: BLE001 - nothing may escape a forked child
        code = 1
    finally:
        os._exit(code)


def _confine(policy: Policy) -> None:
    abi = _landlock.abi_version()
    if abi < _landlock.MINIMUM_ABI:
        msg = f"Landlock ABI {abi} is below {_landlock.MINIMUM_ABI}"
        raise OSError(0, msg)
    handled = _landlock.handled_for_run(abi, Network())
    ruleset = _landlock.PreparedRuleset(
        handled,
        tuple(
            (
                PinnedPath.of(grant),
                _landlock.rights_for(
                    Access.READ if grant.access is Access.EXECUTE else grant.access,
                    is_directory=grant.is_directory,
                    handled=handled,
                ),
            )
            for grant in policy.grants
        ),
    )
    path_fds = ruleset.open_paths()
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    ruleset.enforce(path_fds, [])
    _seccomp.install(_seccomp.compile_filter(_seccomp.FilterOptions(file_worker=True)))
