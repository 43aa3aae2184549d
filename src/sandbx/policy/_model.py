"""The policy's value types: grants, the pin, the network stance, the policy itself.

All immutable. A ``VettedGrant`` can only be made by the vetting in this
package (its constructor demands a private token), so a path that skipped the
refusals cannot reach the boundary.
"""

from __future__ import annotations

from sandbx._enum import Enum
from sandbx._value import value

_VETTING_TOKEN = object()


class Access(Enum):
    """One axis of a path grant. Write implies read; execute implies read."""

    READ = "read"
    WRITE = "write"
    EXECUTE = "execute"

    @property
    def flag(self) -> str:
        return f"--allow-{'exec' if self is Access.EXECUTE else self.value}"


class GrantOrigin(Enum):
    SYSTEM_FLOOR = "system floor"
    WORKING_DIRECTORY = "working directory"
    FLAG = "flag"


@value
class VettedGrant:
    """A path grant after the refusals, pinned to the file it named at derivation."""

    path: str
    access: Access
    origin: GrantOrigin
    device: int
    inode: int
    is_directory: bool
    # Grants at or under /proc name the sandbox's own procfs, mounted inside
    # the sandbox, so they are checked by file system type, not by inode.
    on_procfs: bool
    vetted_by: object

    def __post_init__(self) -> None:
        if self.vetted_by is not _VETTING_TOKEN:
            msg = "a VettedGrant is made only by sandbx.policy's vetting"
            raise TypeError(msg)


class NetworkKind(Enum):
    """``denied``: an empty network namespace. ``any``: the host's, every port and protocol.
    ``ports``: the host's, TCP on the listed ports alone."""

    DENIED = "denied"
    ANY = "any"
    PORTS = "ports"


@value
class ResolverFiles:
    """What the command sees as /etc/hosts, /etc/nsswitch.conf and /etc/resolv.conf."""

    hosts: str
    nsswitch: str
    resolv: str


@value
class Network:
    kind: NetworkKind = NetworkKind.DENIED
    ports: tuple[int, ...] = ()
    unix_sockets: bool = False
    dns_names: tuple[str, ...] = ()
    dns_over_tcp: bool = False
    # With --allow-dns: the files laid over the host's, and how many names did not resolve.
    resolver: ResolverFiles | None = None
    unresolved_names: int = 0


@value
class Pin:
    """The bytes the program after ``--`` must hash to before it may run."""

    program: str
    sha256: str


@value
class Policy:
    """Every grant of one run, derived once and never widened."""

    grants: tuple[VettedGrant, ...]
    environment: tuple[tuple[str, str], ...]
    granted_env_names: tuple[str, ...]
    network: Network
    pin: Pin | None
    timeout_seconds: float | None

    def count(self, access: Access) -> int:
        return sum(1 for grant in self.grants if grant.access is access)


@value
class Command:
    """What to run: ``argv[0]`` is looked up on the command's own PATH unless it has a slash."""

    argv: tuple[str, ...]

    @property
    def program(self) -> str:
        return self.argv[0]

    @property
    def args(self) -> tuple[str, ...]:
        return self.argv[1:]


def vetting_token() -> object:
    return _VETTING_TOKEN
