"""Command-line flags: a small parser of our own, so a bad flag is always EX_USAGE (64).

It takes ``--flag VALUE`` and ``--flag=VALUE``, repeatable and once-only flags,
flags whose value is optional, and stops at ``--`` or at the first word that is
not a flag: everything from there on is the command, passed through untouched.
Abbreviations are refused, so a flag cannot be mistaken for another. It exists
instead of argparse because argparse (with ``re`` and ``gettext``) costs more
than the rest of sandbox-run's start-up.
"""

from __future__ import annotations

from sandbx._value import value
from sandbx.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


@value
class Flag:
    name: str
    help: str
    metavar: str = ""
    repeatable: bool = False
    # For a flag whose value may be left out (``--allow-network [PORT]``): whether
    # the next word is its value rather than the next flag or the command.
    takes_next_as_value: Callable[[str], bool] | None = None

    @property
    def takes_value(self) -> bool:
        return bool(self.metavar)


@value
class Parsed:
    values: dict[str, list[str | None]]
    rest: tuple[str, ...]

    def all(self, name: str) -> list[str]:
        return [item for item in self.values.get(name, []) if item is not None]

    def one(self, name: str) -> str | None:
        found = self.values.get(name, [])
        return found[0] if found else None

    def given(self, name: str) -> bool:
        return name in self.values


class HelpRequested(Exception):
    """``-h`` or ``--help``: the text to print on stdout, after which sandbx exits 0."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def parse(prog: str, summary: str, flags: Sequence[Flag], words: Sequence[str]) -> Parsed:
    by_name = {flag.name: flag for flag in flags}
    values: dict[str, list[str | None]] = {}
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--":
            return Parsed(values=values, rest=tuple(words[index + 1 :]))
        if word in ("-h", "--help"):
            raise HelpRequested(help_text(prog, summary, flags))
        if not word.startswith("-") or word == "-":
            return Parsed(values=values, rest=tuple(words[index:]))
        name, has_inline, inline = word.partition("=")
        flag = by_name.get(name)
        if flag is None:
            raise UsageError(f"{prog}: unknown flag {name}", f"see `{prog} --help`")
        given, index = _value_of(prog, flag, inline if has_inline else None, words, index + 1)
        if name in values and not flag.repeatable:
            raise UsageError(f"{prog}: {name} may be given once", f"pass {name} only once")
        values.setdefault(name, []).append(given)
    return Parsed(values=values, rest=())


def _value_of(
    prog: str, flag: Flag, inline: str | None, words: Sequence[str], index: int
) -> tuple[str | None, int]:
    """The flag's value and the index of the word after it."""
    if inline is not None:
        if not flag.takes_value:
            raise UsageError(f"{prog}: {flag.name} takes no value", f"pass {flag.name} alone")
        return inline, index
    if flag.takes_next_as_value is not None:
        if index < len(words) and flag.takes_next_as_value(words[index]):
            return words[index], index + 1
        return None, index
    if not flag.takes_value:
        return None, index
    if index >= len(words):
        raise UsageError(f"{prog}: {flag.name} needs a value", f"pass {flag.name} {flag.metavar}")
    return words[index], index + 1


def help_text(prog: str, summary: str, flags: Sequence[Flag]) -> str:
    lines = [f"usage: {prog} [FLAGS] -- CMD ARGS…", "", summary, "", "flags:"]
    for flag in flags:
        shown = flag.name
        if flag.takes_value:
            metavar = f"[{flag.metavar}]" if flag.takes_next_as_value else flag.metavar
            shown = f"{flag.name} {metavar}"
        repeat = " (repeatable)" if flag.repeatable else ""
        lines.append(f"  {shown:<26} {flag.help}{repeat}")
    lines.append(f"  {'-h, --help':<26} show this text")
    return "\n".join(lines) + "\n"


def check(condition: bool, prog: str, what: str, hint: str) -> None:
    if not condition:
        raise UsageError(f"{prog}: {what}", hint)
