"""The stored API key: ``$XDG_CONFIG_HOME/sandbx/credentials.toml`` (or ``~/.config/…``).

Written atomically at 0600 in a 0700 directory; read only if neither anyone
else can reach it nor someone else owns it. The key is plaintext on disk and is
never printed. ``ANTHROPIC_API_KEY`` in the environment wins over the file.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping

from sandbx._enum import Enum
from sandbx._private_files import (
    NotPrivate,
    check_private,
    ensure_private_directory,
    sync_directory,
    write_atomically,
)
from sandbx._value import value
from sandbx.errors import SandbxError
from sandbx.policy import credential_file


class KeySource(Enum):
    ENVIRONMENT = "the environment (ANTHROPIC_API_KEY)"
    FILE = "the credential file"


@value
class FoundKey:
    key: str
    source: KeySource
    path: str = ""

    def __repr__(self) -> str:
        return f"FoundKey(source={self.source}, path={self.path!r}, key=<hidden>)"


class CredentialFileRefused(SandbxError):
    """The credential file exists but cannot be trusted or read."""


class NoCredentialHome(SandbxError):
    def __init__(self) -> None:
        super().__init__(
            "there is no place for the credential file ($XDG_CONFIG_HOME and $HOME are unset)",
            "set HOME, or export ANTHROPIC_API_KEY instead",
        )


def credential_path(environ: Mapping[str, str]) -> str:
    path = credential_file(environ)
    if path is None:
        raise NoCredentialHome
    return path


def find_key(environ: Mapping[str, str]) -> FoundKey | None:
    """The key to use: the environment's if not blank, else the file's; None if neither."""
    from_environment = environ.get("ANTHROPIC_API_KEY", "").strip()
    if from_environment:
        return FoundKey(key=from_environment, source=KeySource.ENVIRONMENT)
    path = credential_path(environ)
    if not os.path.lexists(path):
        return None
    return FoundKey(key=_read_key(path), source=KeySource.FILE, path=path)


def _read_key(path: str) -> str:
    try:
        check_private(os.path.dirname(path), directory=True)
        check_private(path, directory=False)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            document = tomllib.load(handle)
    except NotPrivate as exc:
        raise CredentialFileRefused(
            f"refusing the credential file: {exc.path} {exc.why}",
            f"{exc.fix}, or run `sandbx auth logout`",
        ) from exc
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CredentialFileRefused(
            f"the credential file {path} cannot be read: {exc}",
            "run `sandbx auth logout`, then `sandbx auth login` again",
        ) from exc
    key = document.get("api_key")
    if not isinstance(key, str) or not key.strip():
        raise CredentialFileRefused(
            f"the credential file {path} holds no api_key",
            "run `sandbx auth login` again",
        )
    return key.strip()


def store_key(environ: Mapping[str, str], key: str) -> str:
    path = credential_path(environ)
    try:
        ensure_private_directory(os.path.dirname(path))
    except NotPrivate as exc:
        raise CredentialFileRefused(
            f"refusing to store the key: {exc.path} {exc.why}", exc.fix
        ) from exc
    escaped = key.replace("\\", "\\\\").replace('"', '\\"')
    write_atomically(path, f'api_key = "{escaped}"\n'.encode())
    return path


def remove_key(environ: Mapping[str, str]) -> str | None:
    """Remove the stored key whatever its modes; the path removed, or None if there was none."""
    path = credential_path(environ)
    if not os.path.lexists(path):
        return None
    os.unlink(path)
    sync_directory(os.path.dirname(path))
    return path
