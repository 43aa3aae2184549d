"""A helper process forked before the caller has threads, and the pipes the caller asks it on.

Shared by the spawner and the confined worker: the fork, the descriptors the
child keeps (its two pipe ends, nothing of another helper's), one exchange at
a time under a lock, and the close that lets the helper see end-of-file.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

from sandbx.boundary._frames import receive_frame, send_frame
from sandbx.boundary._supervisor import INTERRUPTING_SIGNALS
from sandbx.boundary._syscalls import PR_SET_PDEATHSIG, close_descriptors_but, prctl

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

# In the child: (requests to read, responses to write).
Serve = Callable[[int, int], "NoReturn"]


class HelperProcess:
    def __init__(self, pid: int, requests: int, responses: int) -> None:
        self.pid = pid
        self._requests = requests
        self._responses = responses
        self._lock = threading.Lock()

    @classmethod
    def fork(cls, serve: Serve) -> HelperProcess:
        request_read, request_write = os.pipe2(os.O_CLOEXEC)
        response_read, response_write = os.pipe2(os.O_CLOEXEC)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            # A helper must not hold another helper's pipe ends, or that one
            # would never see end of file when its caller closes its side.
            close_descriptors_but((request_read, response_write))
            _become_helper(parent)
            serve(request_read, response_write)
        os.close(request_read)
        os.close(response_write)
        return cls(pid, request_write, response_read)

    def receive(self) -> bytes:
        return receive_frame(self._responses)

    def exchange(self, request: bytes, *, replies: int = 1) -> list[bytes]:
        """Send one request and read its replies, with no other thread in between."""
        with self._lock:
            send_frame(self._requests, request)
            return [receive_frame(self._responses) for _ in range(replies)]

    def close(self) -> None:
        for fd in (self._requests, self._responses):
            try:
                os.close(fd)
            except OSError:
                continue
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            return


def _become_helper(parent: int) -> None:
    """In the forked helper: die with the caller, and leave a terminal's ctrl-c to it.

    Idle, a helper ignores the interrupting signals; during a run the spawner's
    supervisor blocks them and ends the run on them instead.
    """
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)  # the caller died before the parent-death signal was armed
        for signal_number in INTERRUPTING_SIGNALS:
            signal.signal(signal_number, signal.SIG_IGN)
    except BaseException:  # noqa: BLE001 - nothing may escape a forked child
        os._exit(1)
