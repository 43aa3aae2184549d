"""The network stance of a run: none, any, or TCP on listed ports; Unix sockets; named hosts.

Vets the combinations the boundary could not bound and refuses them: ``--allow-dns``
confines name resolution to a hosts file, so it is refused beside anything that
would let names resolve another way (``--dns-over-tcp``, bare ``--allow-network``,
Unix sockets to a local resolver, port 53) or that leaves nothing to resolve for.
It also resolves the listed names, once, before the sandbox exists, and writes
the three resolver files the command will see.
"""

from __future__ import annotations

import os

from sandbx.errors import PolicyRefusal, UsageError
from sandbx.policy._model import Network, NetworkKind, ResolverFiles

_HIGHEST_PORT = 65535
_DNS_PORT = 53
_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")
_HOSTS_FILE = "/etc/hosts"
_NSSWITCH_FILE = "/etc/nsswitch.conf"


def is_port_text(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` alone would take '²' or Arabic-Indic digits."""
    return text.isascii() and text.isdigit()


def vet_port(text: str) -> int:
    port = int(text) if is_port_text(text) else -1
    if not 1 <= port <= _HIGHEST_PORT:
        raise UsageError(
            f"--allow-network {text} is not a TCP port",
            f"pass a port from 1 to {_HIGHEST_PORT}, or --allow-network alone for any port",
        )
    return port


def vet_dns_name(text: str) -> str:
    name = text.lower().removesuffix(".")
    labels = name.split(".")
    if (
        not name
        or len(name) > 253
        or not set(name) <= _NAME_CHARACTERS
        or any(not label or len(label) > 63 for label in labels)
        or any(label.startswith("-") or label.endswith("-") for label in labels)
    ):
        raise UsageError(
            f"--allow-dns {text!r} is not a host name",
            "pass a name such as example.com: letters, digits, hyphens and dots",
        )
    return name


def derive_network(
    *,
    any_port: bool,
    ports: tuple[str, ...],
    unix_sockets: bool,
    dns_names: tuple[str, ...],
    dns_over_tcp: bool,
) -> Network:
    if any_port and ports:
        raise UsageError(
            "--allow-network alone grants every port, so a port list beside it means nothing",
            "pass either --allow-network or --allow-network PORT…",
        )
    vetted_ports = tuple(sorted({vet_port(port) for port in ports}))
    kind = NetworkKind.ANY if any_port else NetworkKind.PORTS if ports else NetworkKind.DENIED
    names = tuple(dict.fromkeys(vet_dns_name(name) for name in dns_names))
    if names:
        _refuse_dns_beside(
            kind=kind, ports=vetted_ports, unix_sockets=unix_sockets, dns_over_tcp=dns_over_tcp
        )
    return Network(
        kind=kind,
        ports=vetted_ports,
        unix_sockets=unix_sockets,
        dns_names=names,
        dns_over_tcp=dns_over_tcp,
    )


def _refuse_dns_beside(
    *, kind: NetworkKind, ports: tuple[int, ...], unix_sockets: bool, dns_over_tcp: bool
) -> None:
    why = ""
    if dns_over_tcp:
        why = "--dns-over-tcp asks the resolver to query a name server, which --allow-dns forbids"
    elif kind is NetworkKind.ANY:
        why = "bare --allow-network reaches every name server, so names would not stay listed"
    elif unix_sockets:
        why = "--allow-unix-sockets reaches local resolvers (nscd, systemd-resolved) by socket"
    elif _DNS_PORT in ports:
        why = "--allow-network 53 reaches name servers over TCP"
    elif kind is NetworkKind.DENIED:
        why = "there is no network grant, so a resolved name could not be reached"
    if why:
        raise UsageError(
            f"--allow-dns refused: {why}",
            "use --allow-dns NAME with --allow-network PORT (not 53) and nothing else",
        )


def resolver_files(names: tuple[str, ...]) -> tuple[ResolverFiles, int]:
    """The command's hosts, nsswitch.conf and resolv.conf; and how many names did not resolve."""
    for path in (_HOSTS_FILE, _NSSWITCH_FILE):
        if os.path.islink(path) or not os.path.isfile(path):
            raise PolicyRefusal(
                f"--allow-dns refused: {path} is a symlink or missing, so the sandbox's own "
                "could not be laid over it",
                "make it a regular file, or resolve names with --dns-over-tcp instead",
            )
    # Imported here: only --allow-dns needs the socket module.
    import socket  # noqa: PLC0415

    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    unresolved = 0
    for name in names:
        try:
            found = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError):
            unresolved += 1
            continue
        addresses = sorted({str(entry[4][0]) for entry in found})
        lines.extend(
            line for line in (f"{address} {name}" for address in addresses) if line not in lines
        )
    with open(_NSSWITCH_FILE, encoding="utf-8", errors="surrogateescape") as handle:
        nsswitch = _hosts_from_files_only(handle.read())
    files = ResolverFiles(
        hosts="\n".join(lines) + "\n",
        nsswitch=nsswitch,
        resolv="# sandbx --allow-dns: names resolve from /etc/hosts alone; no name server\n",
    )
    return files, unresolved


def _hosts_from_files_only(nsswitch: str) -> str:
    """The first line glibc reads as the hosts database becomes ``hosts: files``; later ones go.

    glibc's parser ends a database name at a colon or at white space, so
    ``hosts files dns`` is a hosts line too, and of several the last one wins.
    """
    kept: list[str] = []
    for line in nsswitch.splitlines():
        if _database_of(line) != "hosts":
            kept.append(line)
        elif "hosts: files" not in kept:
            kept.append("hosts: files")
    if "hosts: files" not in kept:
        kept.append("hosts: files")
    return "\n".join(kept) + "\n"


def _database_of(line: str) -> str:
    stripped = line.lstrip()
    if stripped.startswith("#"):
        return ""
    name = stripped.split(":", 1)[0].split(None, 1)
    return name[0] if name else ""
