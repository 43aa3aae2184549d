"""Argument parsing that never exits on its own: every complaint becomes a ``UsageError`` (64).

argparse prints and exits 2 on a bad flag; sandbx promises EX_USAGE (64) and
one line on stderr, so ``error`` is overridden to raise instead.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from sandbx.errors import UsageError


class Parser(argparse.ArgumentParser):
    def __init__(self, prog: str, description: str) -> None:
        super().__init__(prog=prog, description=description, allow_abbrev=False)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}", f"see `{self.prog} --help`")


class OnlyOnce(argparse.Action):
    """A flag that may be given once per run; a second one is a usage error, not an override."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} may be given once per run")
        setattr(namespace, self.dest, values)


def command_after_separator(words: list[str]) -> list[str]:
    """The command as argparse's REMAINDER left it, without the ``--`` that introduced it."""
    return words[1:] if words[:1] == ["--"] else words


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    return value
