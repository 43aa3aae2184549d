"""Length-prefixed frames over a pair of pipes: how a threaded caller talks to its helpers.

A frame is a 4-byte big-endian length and that many bytes. Pipes rather than a
socket: nothing but the two ends can reach them, and no import is needed.
"""

from __future__ import annotations

import os
import struct

_LENGTH = struct.Struct(">I")
MAX_FRAME = 64 << 20


class ChannelClosed(EOFError):
    """The other end went away between frames or in the middle of one."""


def send_frame(fd: int, payload: bytes) -> None:
    if len(payload) > MAX_FRAME:
        msg = f"a frame holds at most {MAX_FRAME} bytes, not {len(payload)}"
        raise ValueError(msg)
    data = memoryview(_LENGTH.pack(len(payload)) + payload)
    while data:
        written = os.write(fd, data)
        data = data[written:]


def receive_frame(fd: int) -> bytes:
    (length,) = _LENGTH.unpack(_read_exactly(fd, _LENGTH.size))
    if length > MAX_FRAME:
        msg = f"a frame announced {length} bytes, more than {MAX_FRAME}"
        raise ChannelClosed(msg)
    return _read_exactly(fd, length)


def _read_exactly(fd: int, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = os.read(fd, size - len(chunks))
        if not chunk:
            msg = "the other end closed its pipe"
            raise ChannelClosed(msg)
        chunks += chunk
    return bytes(chunks)
