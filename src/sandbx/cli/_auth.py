"""``sandbx auth login|status|logout``: store, check and remove the Anthropic API key.

``login`` reads the key from stdin and never prompts: a terminal on stdin is
refused, so the key reaches neither the terminal, the shell's history nor argv.
``status`` says which source answered, never the key: exit 0 found, 1 none,
2 a stored file it refuses, 64 a command line it would not take.
"""

from __future__ import annotations

import os
import sys

from sandbx._fdio import write_text
from sandbx.cli._flags import check, parse
from sandbx.credentials import CredentialFileRefused, find_key, remove_key, store_key
from sandbx.errors import SandbxError

PROG = "sandbx auth"
_KEY_LIMIT = 16 * 1024


class KeyNotGiven(SandbxError):
    pass


def main(argv: list[str]) -> int:
    parsed = parse(
        PROG,
        "login: store a key read from stdin; status: say where the key comes from; "
        "logout: remove the stored key.",
        (),
        argv,
    )
    check(
        len(parsed.rest) == 1 and parsed.rest[0] in ("login", "status", "logout"),
        PROG,
        "takes one of login, status, logout",
        'run `sandbx auth status`, or `printf %s "$KEY" | sandbx auth login`',
    )
    match parsed.rest[0]:
        case "login":
            return _login()
        case "status":
            return _status()
        case _:
            return _logout()


def _login() -> int:
    if os.isatty(0):
        raise KeyNotGiven(
            "auth login reads the key from stdin and will not prompt, and stdin is a terminal",
            'pipe it in: read -rs KEY && printf %s "$KEY" | sandbx auth login',
        )
    raw = sys.stdin.buffer.read(_KEY_LIMIT + 1)
    if len(raw) > _KEY_LIMIT:
        raise KeyNotGiven("the key on stdin is longer than any API key", "pipe in the key alone")
    key = raw.decode("utf-8", "replace").strip()
    if not key or any(char.isspace() or not char.isprintable() for char in key):
        raise KeyNotGiven(
            "stdin held no key, or more than one word", 'printf %s "$KEY" | sandbx auth login'
        )
    path = store_key(os.environ, key)
    write_text(2, f"sandbx: key stored in {path} (mode 0600)\n")
    return 0


def _status() -> int:
    try:
        found = find_key(os.environ)
    except CredentialFileRefused as exc:
        write_text(2, exc.one_line() + "\n")
        return 2
    if found is None:
        write_text(1, "no key: export ANTHROPIC_API_KEY, or run `sandbx auth login`\n")
        return 1
    where = f" {found.path}" if found.path else ""
    write_text(1, f"a key from {found.source.value}{where}\n")
    return 0


def _logout() -> int:
    removed = remove_key(os.environ)
    write_text(2, f"sandbx: removed {removed}\n" if removed else "sandbx: no stored key\n")
    return 0
