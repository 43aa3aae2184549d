"""Vetting the network flags: ports, names, and the combinations --allow-dns cannot bound."""

import pytest

from sandbx.errors import UsageError
from sandbx.policy import Network, NetworkKind
from sandbx.policy._network import _hosts_from_files_only, derive_network, vet_dns_name, vet_port


def network(**flags: object) -> Network:
    defaults: dict[str, object] = {
        "any_port": False,
        "ports": (),
        "unix_sockets": False,
        "dns_names": (),
        "dns_over_tcp": False,
    }
    return derive_network(**{**defaults, **flags})  # type: ignore[arg-type]


def test_no_flag_is_an_empty_network() -> None:
    assert network().kind is NetworkKind.DENIED


def test_bare_flag_is_any_and_ports_are_sorted_and_deduplicated() -> None:
    assert network(any_port=True).kind is NetworkKind.ANY
    listed = network(ports=("443", "80", "443"))
    assert (listed.kind, listed.ports) == (NetworkKind.PORTS, (80, 443))


@pytest.mark.parametrize("text", ["0", "65536", "70000", "", "-1", "1e3"])
def test_a_port_outside_1_to_65535_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="is not a TCP port"):
        vet_port(text)


def test_bare_and_listed_ports_together_are_refused() -> None:
    with pytest.raises(UsageError, match="port list beside it"):
        network(any_port=True, ports=("80",))


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        ({"ports": ("443",), "dns_over_tcp": True}, "--dns-over-tcp"),
        ({"any_port": True}, "bare --allow-network"),
        ({"ports": ("443",), "unix_sockets": True}, "--allow-unix-sockets"),
        ({"ports": ("443", "53")}, "--allow-network 53"),
        ({}, "no network grant"),
    ],
)
def test_allow_dns_is_refused_beside_what_would_let_names_resolve_elsewhere(
    flags: dict[str, object], why: str
) -> None:
    with pytest.raises(UsageError, match=why):
        network(dns_names=("example.com",), **flags)


def test_allow_dns_with_a_port_list_is_accepted_and_names_are_normalised() -> None:
    granted = network(dns_names=("Example.COM.", "example.com"), ports=("443",))
    assert granted.dns_names == ("example.com",)


@pytest.mark.parametrize(
    "text", ["", ".", "exa mple.com", "-bad.com", "bad-.com", "a..b", "x" * 64 + ".com", "a/b"]
)
def test_a_malformed_name_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="is not a host name"):
        vet_dns_name(text)


def test_nsswitch_keeps_every_database_but_hosts() -> None:
    host = (
        "passwd: files systemd\n# hosts: comment stays\nhosts:  files mdns4 dns\nnetworks: files\n"
    )
    assert _hosts_from_files_only(host) == (
        "passwd: files systemd\n# hosts: comment stays\nhosts: files\nnetworks: files\n"
    )


def test_nsswitch_drops_a_hosts_line_without_a_colon_which_glibc_also_reads() -> None:
    assert _hosts_from_files_only("hosts: files\nhosts files dns\n") == "hosts: files\n"


def test_nsswitch_without_a_hosts_line_gains_one() -> None:
    assert _hosts_from_files_only("passwd: files\n") == "passwd: files\nhosts: files\n"
