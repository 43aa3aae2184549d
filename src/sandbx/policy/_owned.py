"""Where sandbx keeps its own state, which no grant may ever reach.

The session store lives under the XDG state directory, the credential file
under the XDG config directory. A relative XDG variable is ignored, as the XDG
base-directory specification requires.
"""

from __future__ import annotations

import os
import pwd

from sandbx._value import value
from sandbx.policy._paths import canonical

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


@value
class OwnedPath:
    kind: str
    path: str


def _xdg_dir(environ: Mapping[str, str], variable: str, fallback_below_home: str) -> str | None:
    value = environ.get(variable, "")
    if value and os.path.isabs(value):
        return value
    home = environ.get("HOME", "")
    if not (home and os.path.isabs(home)):
        # Without a usable $HOME, sandbx's own state would be found through the
        # password database, so that is the home to protect.
        home = _password_database_home()
    if not home:
        return None
    return os.path.join(home, fallback_below_home)


def _password_database_home() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return ""


def session_store_dir(environ: Mapping[str, str]) -> str | None:
    state = _xdg_dir(environ, "XDG_STATE_HOME", ".local/state")
    return None if state is None else os.path.join(state, "sandbx", "sessions")


def credential_file(environ: Mapping[str, str]) -> str | None:
    config = _xdg_dir(environ, "XDG_CONFIG_HOME", ".config")
    return None if config is None else os.path.join(config, "sandbx", "credentials.toml")


def owned_paths(environ: Mapping[str, str]) -> tuple[OwnedPath, ...]:
    """sandbx's own state, canonical (symlinks in the existing part resolved)."""
    found: list[OwnedPath] = []
    sessions = session_store_dir(environ)
    if sessions is not None:
        found.append(OwnedPath(kind="session store", path=canonical(sessions, base="/")))
    credentials = credential_file(environ)
    if credentials is not None:
        found.append(OwnedPath(kind="credential file", path=canonical(credentials, base="/")))
    return tuple(found)
