"""Derive a run's policy, once, from its flags and the host it runs on.

Every path is made absolute, resolved, checked against the refusals and pinned
to its (device, inode). The working-directory default applies only when no
path flag was given. Nothing here widens a policy after it is returned.
"""

from __future__ import annotations

import math
import os

from sandbx._value import value
from sandbx.errors import GrantPathUnusable, GrantReachesOwnedPath, UsageError
from sandbx.policy._derived_root import vet_derived_root
from sandbx.policy._environment import crossing_environment, granted_names
from sandbx.policy._model import (
    Access,
    Command,
    GrantOrigin,
    Network,
    Policy,
    ResolverFiles,
    VettedGrant,
    vetting_token,
)
from sandbx.policy._network import derive_network, resolver_files
from sandbx.policy._owned import OwnedPath, owned_paths
from sandbx.policy._paths import is_within, overlaps, same_file
from sandbx.policy._pin import parse_digest, vet_pin

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

SYSTEM_FLOOR = ("/usr", "/bin", "/lib", "/lib64")
_PROCFS_ROOT = "/proc"


@value
class GrantFlags:
    """The grant-bearing flags of a run, as typed."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    execute: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    pin_sha256: str | None = None
    timeout_seconds: float | None = None
    network_any: bool = False
    network_ports: tuple[str, ...] = ()
    unix_sockets: bool = False
    dns_names: tuple[str, ...] = ()
    dns_over_tcp: bool = False

    @property
    def names_a_path(self) -> bool:
        return bool(self.read or self.write or self.execute)


def derive_policy(
    flags: GrantFlags,
    command: Command,
    *,
    working_directory: str,
    environ: Mapping[str, str],
) -> Policy:
    owned = owned_paths(environ)
    grants: list[VettedGrant] = [
        _vet(path, Access.EXECUTE, GrantOrigin.SYSTEM_FLOOR, base="/", owned=())
        for path in SYSTEM_FLOOR
        if os.path.exists(path)
    ]
    if flags.names_a_path:
        for access, paths in (
            (Access.READ, flags.read),
            (Access.WRITE, flags.write),
            (Access.EXECUTE, flags.execute),
        ):
            grants.extend(
                _vet(path, access, GrantOrigin.FLAG, base=working_directory, owned=owned)
                for path in paths
            )
    else:
        root = vet_derived_root(working_directory, environ)
        grants.append(
            _vet(root, Access.WRITE, GrantOrigin.WORKING_DIRECTORY, base="/", owned=owned)
        )
    names = granted_names(flags.env)
    network = derive_network(
        any_port=flags.network_any,
        ports=flags.network_ports,
        unix_sockets=flags.unix_sockets,
        dns_names=flags.dns_names,
        dns_over_tcp=flags.dns_over_tcp,
    )
    pin = None
    if flags.pin_sha256 is not None:
        pin = vet_pin(command.program, parse_digest(flags.pin_sha256))
    if network.dns_names:
        files, unresolved = resolver_files(network.dns_names)
        network = replace_resolver(network, files, unresolved)
    environment = crossing_environment(names, environ)
    if network.dns_over_tcp:
        # The one value sandbx sets itself: glibc's stub resolver asks over TCP
        # (resolv.conf(5), "use-vc"), which a port list can allow.
        environment = (
            *((n, v) for n, v in environment if n != "RES_OPTIONS"),
            ("RES_OPTIONS", "use-vc"),
        )
    return Policy(
        grants=_without_repeats(grants),
        environment=environment,
        granted_env_names=names,
        network=network,
        pin=pin,
        timeout_seconds=vet_timeout(flags.timeout_seconds),
    )


def replace_resolver(network: Network, files: ResolverFiles, unresolved: int) -> Network:
    return Network(
        kind=network.kind,
        ports=network.ports,
        unix_sockets=network.unix_sockets,
        dns_names=network.dns_names,
        dns_over_tcp=network.dns_over_tcp,
        resolver=files,
        unresolved_names=unresolved,
    )


def vet_timeout(seconds: float | None) -> float | None:
    if seconds is None:
        return None
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(
            f"--timeout {seconds} is not a positive number of seconds",
            "pass --timeout SECONDS with SECONDS above zero, or leave it out for no limit",
        )
    return seconds


def _vet(
    typed: str, access: Access, origin: GrantOrigin, *, base: str, owned: tuple[OwnedPath, ...]
) -> VettedGrant:
    flag = access.flag if origin is GrantOrigin.FLAG else f"the {origin.value}"
    if not typed or "\0" in typed:
        raise UsageError(f"{flag} needs a path", f"pass {access.flag} PATH")
    absolute = typed if os.path.isabs(typed) else os.path.join(base, typed)
    try:
        resolved = os.path.realpath(absolute, strict=True)
        status = os.stat(resolved)
    except FileNotFoundError as exc:
        raise GrantPathUnusable(flag, typed, "no such file or directory") from exc
    except OSError as exc:
        raise GrantPathUnusable(flag, typed, exc.strerror or "it cannot be reached") from exc
    _refuse_owned_reach(flag, typed, resolved, owned)
    on_procfs = is_within(resolved, _PROCFS_ROOT)
    if on_procfs and resolved != _PROCFS_ROOT:
        first = resolved.removeprefix(_PROCFS_ROOT + "/").split("/", 1)[0]
        if first.isdigit():
            raise GrantPathUnusable(
                flag,
                typed,
                "it names one process's /proc entry, which does not exist inside the sandbox",
                "grant --allow-read /proc; the sandbox gets a /proc of its own processes",
            )
    return VettedGrant(
        path=resolved,
        access=access,
        origin=origin,
        device=status.st_dev,
        inode=status.st_ino,
        is_directory=os.path.isdir(resolved),
        on_procfs=on_procfs,
        vetted_by=vetting_token(),
    )


def _refuse_owned_reach(flag: str, typed: str, resolved: str, owned: tuple[OwnedPath, ...]) -> None:
    for state in owned:
        if overlaps(resolved, state.path) or same_file(resolved, state.path):
            raise GrantReachesOwnedPath(flag, typed, state.path, state.kind)


def _without_repeats(grants: list[VettedGrant]) -> tuple[VettedGrant, ...]:
    seen: set[tuple[str, Access]] = set()
    kept: list[VettedGrant] = []
    for grant in grants:
        key = (grant.path, grant.access)
        if key not in seen:
            seen.add(key)
            kept.append(grant)
    return tuple(kept)
