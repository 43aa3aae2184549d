"""The guard on what sandbx derives by itself: the working-directory default.

Granting the directory a command runs in is convenient and, from the wrong
directory, disastrous. So the derived root is refused when it is the
filesystem root, your home or above it, where homes live or above that, a
home directory of any person on this host (any home-shaped directory when
``$HOME`` cannot be trusted), or anything overlapping the system binaries.
It governs only the default; a path you name with a flag is vetted elsewhere.
"""

from __future__ import annotations

import os
import pwd

from sandbx.errors import DerivedRootRefused
from sandbx.policy._paths import canonical, is_within, overlaps

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

HOME_BASES = ("/home", "/Users", "/var/home", "/usr/home", "/export/home")
SYSTEM_BINARY_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# useradd's UID_MIN in /etc/login.defs: accounts below it belong to the system.
_FIRST_PERSON_UID = 1000


def usable_home(environ: Mapping[str, str]) -> str | None:
    home = environ.get("HOME", "")
    if not home or not os.path.isabs(home) or not os.path.isdir(home):
        return None
    resolved = canonical(home, base="/")
    return None if resolved == "/" else resolved


def vet_derived_root(working_directory: str, environ: Mapping[str, str]) -> str:
    """Return the canonical working directory, or raise ``DerivedRootRefused`` naming why."""
    root = canonical(working_directory, base="/")
    home = usable_home(environ)
    bases = _home_bases(home)
    why = (
        _filesystem_root(root)
        or _your_home(root, home)
        or _where_homes_live(root, bases)
        or _someones_home(root, home, bases)
        or _system_binaries(root)
    )
    if why:
        raise DerivedRootRefused(why, root)
    return root


def _filesystem_root(root: str) -> str:
    return "the filesystem root" if root == "/" else ""


def _your_home(root: str, home: str | None) -> str:
    if home is None:
        return ""
    if root == home:
        return "your home directory"
    if is_within(home, root):
        return "a directory that contains your home directory"
    return ""


def _where_homes_live(root: str, bases: tuple[str, ...]) -> str:
    for base in bases:
        if root == base:
            return "the directory where home directories live"
        if is_within(base, root):
            return "a directory that contains home directories"
    return ""


def _someones_home(root: str, home: str | None, bases: tuple[str, ...]) -> str:
    if any(is_within(person_home, root) for person_home in _homes_of_people()):
        return "a home directory"
    if home is None and _is_home_shaped(root, bases):
        return "a home-shaped directory ($HOME is unset or unusable)"
    return ""


def _system_binaries(root: str) -> str:
    if any(overlaps(root, system) for system in _existing_canonical(SYSTEM_BINARY_DIRS)):
        return "a directory overlapping the system binaries"
    return ""


def _home_bases(home: str | None) -> tuple[str, ...]:
    bases = set(_existing_canonical(HOME_BASES))
    if home is not None:
        parent = os.path.dirname(home)
        if parent != "/":
            bases.add(parent)
    return tuple(sorted(bases))


def _homes_of_people() -> tuple[str, ...]:
    homes = {"/root"}
    for entry in pwd.getpwall():
        if entry.pw_uid >= _FIRST_PERSON_UID and entry.pw_dir not in ("", "/"):
            homes.add(entry.pw_dir)
    return tuple(_existing_canonical(sorted(homes)))


def _is_home_shaped(root: str, bases: Iterable[str]) -> bool:
    return root == "/root" or any(os.path.dirname(root) == base for base in bases)


def _existing_canonical(paths: Iterable[str]) -> list[str]:
    return [canonical(path, base="/") for path in paths if os.path.exists(path)]
