"""The cleared environment: which names cross into a command, and with what value.

A command sees only the seven default names that are set and the names
granted by ``--allow-env``, each with the value sandbx itself holds. Values are
never logged; only the count of granted names is.
"""

from __future__ import annotations

from sandbx.errors import EnvironmentNameRefused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

DEFAULT_ENV_NAMES = ("PATH", "HOME", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


def vet_env_name(name: str) -> str:
    if not name:
        raise EnvironmentNameRefused(name, "the name is empty")
    if "\0" in name:
        raise EnvironmentNameRefused(name, "the name contains a NUL byte")
    if "=" in name:
        raise EnvironmentNameRefused(
            name, "it looks like NAME=VALUE; sandbx never takes a value on the command line"
        )
    return name


def granted_names(extra_names: Iterable[str]) -> tuple[str, ...]:
    names = list(DEFAULT_ENV_NAMES)
    for name in extra_names:
        if name not in names:
            names.append(vet_env_name(name))
    return tuple(names)


def crossing_environment(
    names: Iterable[str], environ: Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    return tuple((name, environ[name]) for name in names if name in environ)
