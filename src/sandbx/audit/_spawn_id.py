"""Spawn ids: which run a record belongs to, unique across processes.

Not a pid, which the kernel reuses: the writer's pid in hex, 64 random bits
fixed for the process, and a counter, so several sandbx processes can share
one audit file without colliding.
"""

from __future__ import annotations

import itertools
import os

_PROCESS_NONCE = int.from_bytes(os.urandom(8), "little")
_COUNTER = itertools.count()


def next_spawn_id() -> str:
    return f"{os.getpid():x}.{_PROCESS_NONCE:016x}.{next(_COUNTER)}"
