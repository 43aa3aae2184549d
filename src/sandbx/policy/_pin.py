"""Program pins: the digest format, hashing a file, and the refusals a pin needs.

A pin names bytes, not a path, so it is refused where it could not check what
runs: a relative program, a ``#!`` script (the interpreter would run
unpinned), and a program that may be executed but not read.
"""

from __future__ import annotations

import os

from sandbx.errors import PinRefused, UsageError
from sandbx.policy._model import Pin

_HEX_DIGITS = frozenset("0123456789abcdef")
_CHUNK = 1 << 20


def parse_digest(text: str) -> str:
    digest = text.strip().lower()
    if len(digest) != 64 or not set(digest) <= _HEX_DIGITS:
        raise UsageError(
            f"--pin-sha256 {text!r} is not a SHA-256 digest",
            "pass 64 hex digits, as `sandbx hash PATH` prints them",
        )
    return digest


def sha256_of_fd(fd: int) -> str:
    # Imported here: loading OpenSSL costs milliseconds that only a pinned run needs.
    import hashlib  # noqa: PLC0415

    digest = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, _CHUNK, offset):
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


def starts_with_shebang(fd: int) -> bool:
    return os.pread(fd, 2, 0) == b"#!"


def vet_pin(program: str, digest: str) -> Pin:
    if not os.path.isabs(program):
        raise UsageError(
            f"--pin-sha256 needs an absolute program path, not {program!r}",
            "name the program after -- by its absolute path",
        )
    try:
        fd = os.open(program, os.O_RDONLY | os.O_CLOEXEC)
    except PermissionError as exc:
        raise PinRefused(
            program,
            "you may not read it, so its bytes cannot be checked",
            "pin a program you can read",
        ) from exc
    except OSError as exc:
        raise PinRefused(program, exc.strerror or "cannot open it", "pin an existing file") from exc
    try:
        if starts_with_shebang(fd):
            raise PinRefused(
                program,
                "it is a #! script, and its interpreter would run unpinned",
                "pin the interpreter and pass the script as an argument",
            )
    finally:
        os.close(fd)
    return Pin(program=program, sha256=digest)
