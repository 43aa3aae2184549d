"""``sandbx hash PATH``: print a file's SHA-256 in the form ``--pin-sha256`` takes."""

from __future__ import annotations

import os

from sandbx.cli._parsing import Parser
from sandbx.errors import HostError
from sandbx.policy import sha256_of_fd


def main(argv: list[str]) -> int:
    parser = Parser("sandbx hash", "Print PATH's SHA-256, as --pin-sha256 takes it.")
    parser.add_argument("path", metavar="PATH")
    arguments = parser.parse_args(argv)
    try:
        fd = os.open(arguments.path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise HostError(f"cannot read {arguments.path}: {exc.strerror}") from exc
    try:
        digest = sha256_of_fd(fd)
    except IsADirectoryError as exc:
        raise HostError(f"{arguments.path} is a directory", "hash one program file") from exc
    finally:
        os.close(fd)
    os.write(1, f"{digest}\n".encode())
    return 0
