"""``sandbx hash PATH``: print a file's SHA-256 in the form ``--pin-sha256`` takes."""

from __future__ import annotations

import os

from sandbx.cli._flags import check, parse
from sandbx.errors import HostError
from sandbx.policy import sha256_of_fd

PROG = "sandbx hash"


def main(argv: list[str]) -> int:
    parsed = parse(PROG, "Print PATH's SHA-256, as --pin-sha256 takes it.", (), argv)
    check(len(parsed.rest) == 1, PROG, "takes exactly one PATH", "run `sandbx hash PATH`")
    path = parsed.rest[0]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise HostError(f"cannot read {path}: {exc.strerror}", "name a file you can read") from exc
    try:
        digest = sha256_of_fd(fd)
    except IsADirectoryError as exc:
        raise HostError(f"{path} is a directory", "hash one program file") from exc
    finally:
        os.close(fd)
    os.write(1, f"{digest}\n".encode())
    return 0
