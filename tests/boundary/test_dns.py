"""--allow-dns and --dns-over-tcp on the real kernel: listed names resolve and connect, others fail.

Test names come from a hosts file bind-mounted over /etc/hosts in a private mount namespace
around the sandbx process, so the host's own resolver files are never touched.
"""

from __future__ import annotations

import functools
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import SANDBX, Run, Sandbx, parse_records

pytestmark = pytest.mark.boundary

PYTHON = "/usr/bin/python3"
CURL = "/usr/bin/curl"
GETENT = "/usr/bin/getent"
HOST_FILES = ("/etc/hosts", "/etc/nsswitch.conf", "/etc/resolv.conf")
RUN_TIMEOUT = 60
# "Fails at once, not after a timeout": the whole sandbx run, start-up included.
FAST = 5.0

_TOKEN = uuid.uuid4().hex[:12]
LISTED = f"sandbx-dns-test-{_TOKEN}.test"  # 127.0.0.1 in the outer view
SECOND = f"sandbx-dns-second-{_TOKEN}.test"  # 127.0.0.2 in the outer view
UNLISTED = f"sandbx-dns-unlisted-{_TOKEN}.test"  # 127.0.0.1 in the outer view, never listed
MISSING = f"sandbx-dns-missing-{_TOKEN}.test"  # in no hosts file at all
MISSING_TOO = f"sandbx-dns-missing-too-{_TOKEN}.test"

OUTER_HOSTS = f"127.0.0.1 localhost\n127.0.0.1 {LISTED}\n127.0.0.2 {SECOND}\n127.0.0.1 {UNLISTED}\n"
# The sandbx process's own lookups of a missing name end at once on a port nothing serves.
OUTER_RESOLV = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"
LOOPBACK = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"

# Runs as the sandbx process's parent: a private mount namespace (and, unprivileged, a user
# namespace mapping only the caller's own ids, so sandbx still runs as that user without
# capabilities after the exec), the given bind mounts, then the exec.
_OUTER = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000

def check(result, what):
    if result != 0:
        sys.stderr.write(f"outer namespace: {what}: {os.strerror(ctypes.get_errno())}\n")
        os._exit(125)

uid, gid = os.getuid(), os.getgid()
check(libc.unshare(CLONE_NEWNS | (CLONE_NEWUSER if uid else 0)), "unshare")
if uid:
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)
check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
for source, target in json.loads(sys.argv[1]):
    check(libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None),
          f"bind {source} on {target}")
os.execvp(sys.argv[2], sys.argv[2:])
"""
OUTER_FAILED = 125

# Reads the three resolver files inside the sandbox; an error is reported by its errno name.
READ_RESOLVER_FILES = """
import errno, json
out = {}
for path in ("/etc/hosts", "/etc/nsswitch.conf", "/etc/resolv.conf"):
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            out[path] = handle.read()
    except OSError as error:
        out[path] = errno.errorcode[error.errno]
print(json.dumps(out))
"""

# Tries to change /etc/hosts two ways, then prints what the command sees there.
WRITE_HOSTS = """
import errno, json, os
tries = []
for flags in (os.O_WRONLY | os.O_APPEND, os.O_WRONLY | os.O_TRUNC):
    try:
        fd = os.open("/etc/hosts", flags)
    except OSError as error:
        tries.append(errno.errorcode[error.errno])
    else:
        os.write(fd, b"192.0.2.66 written-from-inside\\n")
        os.close(fd)
        tries.append("WROTE")
with open("/etc/hosts", encoding="utf-8") as handle:
    print(json.dumps({"tries": tries, "hosts": handle.read()}))
"""

# Connects to NAME:PORT and sends PAYLOAD, then waits for the listener to close.
CONNECT_AND_SEND = """
import socket, sys
name, port, payload = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
with socket.create_connection((name, port), timeout=10) as connection:
    connection.sendall(payload)
    connection.shutdown(socket.SHUT_WR)
    connection.recv(1)
print("sent")
"""

RESOLVE = """
import socket, sys
print(sorted({entry[4][0] for entry in socket.getaddrinfo(sys.argv[1], None)}))
"""


# --- the outer namespace --------------------------------------------------------------------


@functools.cache
def _outer_namespace_problem() -> str | None:
    """Why this host cannot give sandbx a private /etc/hosts, or None when it can."""
    with tempfile.TemporaryDirectory(prefix="sandbx-dns-probe-") as directory:
        probe = Path(directory) / "hosts"
        probe.write_text(OUTER_HOSTS)
        probe.chmod(0o644)
        completed = subprocess.run(
            [
                sys.executable,
                "-c",
                _OUTER,
                json.dumps([[str(probe), "/etc/hosts"]]),
                GETENT,
                "hosts",
                LISTED,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    if completed.returncode != 0 or LISTED not in completed.stdout:
        return (
            "cannot bind a hosts file of the test's own over /etc/hosts in a private mount "
            f"namespace here: {completed.stderr.strip() or completed.returncode}"
        )
    return None


@dataclass
class Resolver:
    """Runs sandbx in a private mount namespace whose /etc/hosts lists the test's names."""

    sbx: Sandbx
    root: Path
    hosts: Path
    resolv: Path
    binds: list[tuple[str, str]] = field(default_factory=list)

    def run(
        self,
        *command: str,
        flags: Sequence[str] = (),
        binds: Sequence[tuple[str, str]] | None = None,
        timeout: float = RUN_TIMEOUT,
        **env: str,
    ) -> Run:
        mounts = self.binds if binds is None else binds
        completed = subprocess.run(
            [
                sys.executable,
                "-c",
                _OUTER,
                json.dumps(mounts),
                *SANDBX,
                "sandbox-run",
                *flags,
                "--",
                *command,
            ],
            cwd=self.sbx.workdir,
            env={**self.sbx.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert completed.returncode != OUTER_FAILED, completed.stderr
        return Run(
            returncode=completed.returncode,
            stdout=completed.stdout,
            stderr=completed.stderr,
            records=parse_records(completed.stderr),
        )

    def timed(self, *command: str, flags: Sequence[str] = ()) -> tuple[Run, float]:
        began = time.monotonic()
        run = self.run(*command, flags=flags)
        return run, time.monotonic() - began


def _host_state() -> dict[str, tuple[object, ...]]:
    state: dict[str, tuple[object, ...]] = {}
    for path in HOST_FILES:
        try:
            status = os.lstat(path)
        except FileNotFoundError:
            state[path] = ("missing",)
            continue
        content = os.readlink(path) if os.path.islink(path) else Path(path).read_bytes()
        state[path] = (content, status.st_ino, status.st_mode, status.st_mtime_ns)
    return state


@pytest.fixture(autouse=True)
def _host_files_unchanged() -> Iterator[None]:
    """No test here may change the host's resolver files, whatever it asked sandbx to do."""
    before = _host_state()
    yield
    assert _host_state() == before


def _unusable_here() -> str | None:
    for tool in (PYTHON, CURL, GETENT):
        if not os.access(tool, os.X_OK):
            return f"{tool} is not on this host"
    return _outer_namespace_problem()


@pytest.fixture
def any_resolver(sbx: Sandbx, tmp_path: Path) -> Resolver:
    """A ``Resolver`` whatever shape the host's own resolver files take."""
    problem = _unusable_here()
    if problem:
        pytest.skip(problem)
    root = tmp_path / "resolver"
    root.mkdir()
    hosts = root / "hosts"
    hosts.write_text(OUTER_HOSTS)
    resolv = root / "resolv.conf"
    resolv.write_text(OUTER_RESOLV)
    for path in (hosts, resolv):
        path.chmod(0o644)
    binds = [(str(hosts), "/etc/hosts")]
    if os.path.exists("/etc/resolv.conf"):
        binds.append((str(resolv), "/etc/resolv.conf"))
    return Resolver(sbx=sbx, root=root, hosts=hosts, resolv=resolv, binds=binds)


@pytest.fixture
def resolver(any_resolver: Resolver) -> Resolver:
    """A ``Resolver`` on a host whose /etc/hosts and nsswitch.conf --allow-dns can lay over."""
    for path in ("/etc/hosts", "/etc/nsswitch.conf"):
        if os.path.islink(path) or not os.path.isfile(path):
            pytest.skip(f"{path} is a symlink or missing here, which --allow-dns refuses")
    return any_resolver


# --- a TCP listener in the test process -----------------------------------------------------


class Listener:
    """Accepts connections on 127.0.0.1, keeps what each sent, answers HTTP when asked to."""

    def __init__(self, http_body: bytes | None) -> None:
        self.http_body = http_body
        self.received: list[bytes] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port: int = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with connection:
                connection.settimeout(10)
                self.received.append(self._read(connection))
                if self.http_body is not None:
                    connection.sendall(
                        b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n"
                        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                        % (len(self.http_body), self.http_body)
                    )

    def _read(self, connection: socket.socket) -> bytes:
        data = b""
        while True:
            try:
                chunk = connection.recv(4096)
            except OSError:
                return data
            data += chunk
            if not chunk or (self.http_body is not None and b"\r\n\r\n" in data):
                return data

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener(http_body=None)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def web() -> Iterator[Listener]:
    server = Listener(http_body=b"hello from the test\n")
    try:
        yield server
    finally:
        server.close()


# --- assertions -----------------------------------------------------------------------------


def _ran(run: Run) -> dict[str, object]:
    """The command ran and exited 0; its ``spawned`` record."""
    assert run.returncode == 0, run.stderr
    assert run.record("exited")["code"] == 0, run.stderr
    return run.record("spawned")


def _dns_degraded(run: Run) -> list[dict[str, object]]:
    return [
        record
        for record in run.records
        if record["decision"] == "degraded" and "resolv" in str(record.get("what", ""))
    ]


def _refused(run: Run, code: int) -> str:
    """Refused before anything spawned: ``code``, no record, one line; that line."""
    assert run.returncode == code, run.stderr
    assert run.records == [], run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert run.messages == lines, run.stderr
    return lines[0]


def _nsswitch_with_files_only(text: str) -> list[str]:
    """``text``'s lines, its ``hosts:`` line replaced by ``hosts: files``."""
    return [
        "hosts: files" if line.split(":", 1)[0].strip() == "hosts" else line
        for line in text.splitlines()
    ]


def _nameserver_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.split()[:1] == ["nameserver"]]


def _dns(*names: str) -> list[str]:
    return [flag for name in names for flag in ("--allow-dns", name)]


def _port(port: int) -> list[str]:
    return ["--allow-network", str(port)]


# --- a listed name ----------------------------------------------------------------------------


def test_a_listed_name_resolves_and_connects_with_no_etc_grant(
    resolver: Resolver, listener: Listener
) -> None:
    payload = f"bytes for the listener {_TOKEN}"
    run = resolver.run(
        PYTHON,
        "-c",
        CONNECT_AND_SEND,
        LISTED,
        str(listener.port),
        payload,
        flags=[*_dns(LISTED), *_port(listener.port)],
    )
    _ran(run)
    assert run.stdout == "sent\n"
    assert listener.received == [payload.encode()]


def test_curl_fetches_from_a_listed_name(resolver: Resolver, web: Listener) -> None:
    run = resolver.run(
        CURL,
        "-sS",
        "--max-time",
        "20",
        f"http://{LISTED}:{web.port}/",
        flags=[*_dns(LISTED), *_port(web.port)],
    )
    _ran(run)
    assert run.stdout == "hello from the test\n"
    assert len(web.received) == 1
    assert f"Host: {LISTED}:{web.port}\r\n".encode() in web.received[0]


def test_getent_resolves_every_listed_name_to_its_own_address(resolver: Resolver) -> None:
    run = resolver.run(GETENT, "hosts", LISTED, SECOND, flags=[*_dns(LISTED, SECOND), *_port(443)])
    _ran(run)
    assert [line.split() for line in run.stdout.splitlines()] == [
        ["127.0.0.1", LISTED],
        ["127.0.0.2", SECOND],
    ]


def test_a_listed_name_resolves_through_getaddrinfo_to_its_address_only(
    resolver: Resolver,
) -> None:
    run = resolver.run(PYTHON, "-c", RESOLVE, SECOND, flags=[*_dns(SECOND), *_port(443)])
    _ran(run)
    assert run.stdout == "['127.0.0.2']\n"


def test_a_name_listed_in_capitals_with_a_final_dot_resolves(resolver: Resolver) -> None:
    run = resolver.run(GETENT, "hosts", LISTED, flags=[*_dns(f"{LISTED.upper()}."), *_port(443)])
    spawned = _ran(run)
    assert run.stdout.split() == ["127.0.0.1", LISTED]
    assert spawned["dns_names"] == 1


# --- an unlisted name -------------------------------------------------------------------------


# The positive control in the same sandbox: the listed name resolves (else exit 99), so the
# unlisted name's failure is the hosts file's doing, not an unreadable one.
AFTER_THE_LISTED_NAME = 'found=$(getent hosts "$1") || exit 99; shift; exec "$@"'


def _after_listed(*command: str) -> tuple[str, ...]:
    return ("/bin/sh", "-c", AFTER_THE_LISTED_NAME, "sh", LISTED, *command)


@pytest.mark.parametrize(
    "etc_grant",
    [[], ["--allow-read", "/etc"]],
    ids=["no-etc-grant", "read-grant-on-etc"],
)
@pytest.mark.parametrize("name", [UNLISTED, MISSING], ids=["in-the-host-hosts", "in-no-hosts"])
def test_getent_fails_at_once_on_a_name_the_run_did_not_list(
    resolver: Resolver, name: str, etc_grant: list[str]
) -> None:
    run, elapsed = resolver.timed(
        *_after_listed(GETENT, "hosts", name), flags=[*_dns(LISTED), *_port(443), *etc_grant]
    )
    assert run.returncode == 2, run.stderr
    assert run.record("exited")["code"] == 2
    assert run.stdout == ""
    assert elapsed < FAST


def test_curl_cannot_resolve_an_unlisted_name_and_reaches_nothing(
    resolver: Resolver, web: Listener
) -> None:
    run, elapsed = resolver.timed(
        *_after_listed(CURL, "-sS", "--max-time", "20", f"http://{UNLISTED}:{web.port}/"),
        flags=[*_dns(LISTED), *_port(web.port)],
    )
    assert run.returncode == 6, run.stderr
    assert run.record("exited")["code"] == 6
    assert "resolve host" in run.stderr
    assert elapsed < FAST
    assert web.received == []


def test_localhost_still_resolves_beside_a_listed_name(resolver: Resolver) -> None:
    run, elapsed = resolver.timed(GETENT, "ahosts", "localhost", flags=[*_dns(LISTED), *_port(443)])
    _ran(run)
    addresses = {line.split()[0] for line in run.stdout.splitlines()}
    assert "127.0.0.1" in addresses, run.stdout
    assert elapsed < FAST


def test_localhost_connects_beside_a_listed_name(resolver: Resolver, listener: Listener) -> None:
    run = resolver.run(
        PYTHON,
        "-c",
        CONNECT_AND_SEND,
        "localhost",
        str(listener.port),
        "to localhost",
        flags=[*_dns(LISTED), *_port(listener.port)],
    )
    _ran(run)
    assert listener.received == [b"to localhost"]


UDP_QUERY = """
import errno, socket, sys
try:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.sendto(b"a query of the command's own", ("127.0.0.1", int(sys.argv[1])))
except OSError as error:
    print(errno.errorcode[error.errno])
else:
    print("sent")
"""


def test_a_command_cannot_ask_a_name_server_of_its_own_over_udp(resolver: Resolver) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(0.5)
        port = server.getsockname()[1]
        run = resolver.run(PYTHON, "-c", UDP_QUERY, str(port), flags=[*_dns(LISTED), *_port(port)])
        _ran(run)
        assert run.stdout.strip() in ("EPERM", "EACCES"), run.stdout
        with pytest.raises(TimeoutError):
            server.recv(512)


# --- the files the command sees ---------------------------------------------------------------


@pytest.mark.parametrize(
    "etc_grant",
    [[], ["--allow-read", "/etc"]],
    ids=["no-etc-grant", "read-grant-on-etc"],
)
def test_the_command_sees_its_own_hosts_nsswitch_and_resolv_conf(
    resolver: Resolver, etc_grant: list[str]
) -> None:
    run = resolver.run(
        PYTHON,
        "-c",
        READ_RESOLVER_FILES,
        flags=[*_dns(LISTED, SECOND), *_port(443), *etc_grant],
    )
    _ran(run)
    seen = json.loads(run.stdout)
    assert seen["/etc/hosts"] == f"{LOOPBACK}127.0.0.1 {LISTED}\n127.0.0.2 {SECOND}\n"
    host_nsswitch = Path("/etc/nsswitch.conf").read_text(encoding="utf-8", errors="surrogateescape")
    assert seen["/etc/nsswitch.conf"].splitlines() == _nsswitch_with_files_only(host_nsswitch)
    resolv = seen["/etc/resolv.conf"]
    assert resolv not in ("EACCES", "ENOENT", "EPERM"), resolv
    assert _nameserver_lines(resolv) == [], resolv


def _glibc_database(line: str) -> tuple[str, list[str]] | None:
    """How glibc 2.3x's nss_database.c reads one line: a name ended by a space or a colon,
    then any run of spaces and colons, then the sources; a comment ends the line."""
    text = line.split("#", 1)[0].lstrip()
    name = re.match(r"[^\s:]*", text)
    assert name is not None
    rest = text[name.end() :]
    if not name.group(0) or not rest:
        return None
    return name.group(0), rest.lstrip(" \t:").split()


def _effective_hosts_sources(nsswitch: str) -> list[str] | None:
    """The sources glibc uses for hosts: its last definition wins; None is glibc's default."""
    found = None
    for line in nsswitch.splitlines():
        database = _glibc_database(line)
        if database is not None and database[0] == "hosts":
            found = database[1]
    return found


def _not_hosts(nsswitch: str) -> list[str]:
    return [
        line for line in nsswitch.splitlines() if (_glibc_database(line) or ("", []))[0] != "hosts"
    ]


NSSWITCH_SHAPES = {
    "spaced": "passwd: files\nhosts:\t\tfiles dns\nnetworks: files\n",
    "no-space": "passwd: files\nhosts:files dns\n",
    "indented": "passwd: files\n   hosts: files dns\n",
    "commented-first": "passwd: files\n# hosts: dns\nhosts: files dns # trailing\n",
    "no-colon": "passwd: files\nhosts files dns\n",
    "no-hosts-line": "passwd: files\ngroup: files\n",
    "defined-twice": "passwd: files\nhosts: files\nhosts files dns\n",
}


@pytest.mark.parametrize("shape", NSSWITCH_SHAPES)
def test_the_command_nsswitch_names_files_alone_whatever_the_host_hosts_line_looks_like(
    resolver: Resolver, shape: str
) -> None:
    outer = resolver.root / "nsswitch.conf"
    outer.write_text(NSSWITCH_SHAPES[shape])
    outer.chmod(0o644)
    binds = [*resolver.binds, (str(outer), "/etc/nsswitch.conf")]
    run = resolver.run(
        "/bin/cat", "/etc/nsswitch.conf", flags=[*_dns(LISTED), *_port(443)], binds=binds
    )
    _ran(run)
    assert _effective_hosts_sources(run.stdout) == ["files"], run.stdout
    assert _not_hosts(run.stdout) == _not_hosts(NSSWITCH_SHAPES[shape]), run.stdout
    resolved = resolver.run(
        GETENT, "hosts", LISTED, flags=[*_dns(LISTED), *_port(443)], binds=binds
    )
    _ran(resolved)
    assert resolved.stdout.split() == ["127.0.0.1", LISTED]


def test_the_hosts_file_lists_a_name_once_per_address(resolver: Resolver) -> None:
    run = resolver.run("/bin/cat", "/etc/hosts", flags=[*_dns(LISTED), *_port(443)])
    _ran(run)
    assert run.stdout == f"{LOOPBACK}127.0.0.1 {LISTED}\n"


def test_allow_dns_grants_no_other_path_under_etc(resolver: Resolver) -> None:
    run = resolver.run("/bin/cat", "/etc/passwd", flags=[*_dns(LISTED), *_port(443)])
    assert run.record("exited")["code"] != 0
    assert "Permission denied" in run.stderr
    assert run.stdout == ""


@pytest.mark.parametrize("granted", ["/etc", "/etc/hosts"])
def test_hosts_is_not_writable_even_under_a_write_grant_on_etc(
    resolver: Resolver, granted: str
) -> None:
    outer_before = resolver.hosts.read_bytes()
    run = resolver.run(
        PYTHON,
        "-c",
        WRITE_HOSTS,
        flags=[*_dns(LISTED), *_port(443), "--allow-write", granted],
    )
    _ran(run)
    seen = json.loads(run.stdout)
    assert len(seen["tries"]) == 2
    assert set(seen["tries"]) <= {"EROFS", "EACCES"}, seen["tries"]
    assert seen["hosts"] == f"{LOOPBACK}127.0.0.1 {LISTED}\n"
    assert resolver.hosts.read_bytes() == outer_before


def test_the_host_resolver_files_are_unchanged_by_runs(resolver: Resolver) -> None:
    before = _host_state()
    outer_before = (resolver.hosts.read_bytes(), resolver.resolv.read_bytes())
    for flags in (
        [*_dns(LISTED), *_port(443)],
        [*_dns(LISTED, SECOND, MISSING), *_port(443), "--allow-write", "/etc"],
    ):
        resolver.run(PYTHON, "-c", WRITE_HOSTS, flags=flags)
    assert _host_state() == before
    assert (resolver.hosts.read_bytes(), resolver.resolv.read_bytes()) == outer_before


# --- the audit trail --------------------------------------------------------------------------


@pytest.mark.parametrize("names", [[LISTED], [LISTED, SECOND]], ids=["one", "two"])
def test_spawned_counts_the_listed_names(resolver: Resolver, names: list[str]) -> None:
    run = resolver.run("/bin/true", flags=[*_dns(*names), *_port(443)])
    spawned = _ran(run)
    assert spawned["dns_names"] == len(names)
    assert spawned["dns_over_tcp"] is False
    assert _dns_degraded(run) == []


def test_allow_dns_changes_no_other_field_of_the_policy(resolver: Resolver) -> None:
    without = _ran(resolver.run("/bin/true", flags=_port(443)))
    with_names = _ran(resolver.run("/bin/true", flags=[*_dns(LISTED, SECOND), *_port(443)]))
    ignored = {"time", "spawn", "dns_names"}
    assert {k: v for k, v in with_names.items() if k not in ignored} == {
        k: v for k, v in without.items() if k not in ignored
    }
    assert (without["dns_names"], with_names["dns_names"]) == (0, 2)


def test_a_name_that_does_not_resolve_is_counted_in_a_degraded_record_never_named(
    resolver: Resolver,
) -> None:
    run = resolver.run(
        "/bin/cat",
        "/etc/hosts",
        flags=[*_dns(MISSING, LISTED, MISSING_TOO), *_port(443)],
    )
    spawned = _ran(run)
    assert spawned["dns_names"] == 3
    degraded = _dns_degraded(run)
    assert len(degraded) == 1, run.records
    assert degraded[0]["spawn"] == spawned["spawn"]
    what = str(degraded[0]["what"])
    assert re.search(r"(?<!\d)2(?!\d)", what), what
    assert MISSING not in run.stderr
    assert MISSING_TOO not in run.stderr
    # The run still happens, with the names that did resolve.
    assert run.stdout == f"{LOOPBACK}127.0.0.1 {LISTED}\n"


# --- refusals ---------------------------------------------------------------------------------


REFUSED_BESIDE = [
    pytest.param(["--dns-over-tcp", *_port(443)], "--dns-over-tcp", id="dns-over-tcp"),
    pytest.param(["--allow-network"], "--allow-network", id="bare-allow-network"),
    pytest.param([*_port(443), "--allow-unix-sockets"], "--allow-unix-sockets", id="unix-sockets"),
    pytest.param([*_port(443), *_port(53)], "53", id="port-53"),
    pytest.param([*_port(53)], "53", id="port-53-alone"),
    pytest.param([], "network", id="no-network-grant"),
]


@pytest.mark.parametrize("reverse", [False, True], ids=["dns-first", "dns-last"])
@pytest.mark.parametrize(("beside", "named"), REFUSED_BESIDE)
def test_allow_dns_is_refused_beside_a_way_around_it(
    any_resolver: Resolver, beside: list[str], named: str, reverse: bool
) -> None:
    resolver = any_resolver
    marker = resolver.sbx.workdir / "ran"
    flags = [*beside, *_dns(LISTED)] if reverse else [*_dns(LISTED), *beside]
    run = resolver.run("/usr/bin/touch", str(marker), flags=flags)
    line = _refused(run, 64)
    assert "--allow-dns" in line, line
    assert named in line, line
    assert not marker.exists()


def _fake_etc(resolver: Resolver, name: str, shape: str) -> list[tuple[str, str]]:
    """Binds that give the sandbx process an /etc like the host's, with ``name`` a symlink (to
    a file outside /etc) or missing: the host's /etc is bound aside, and a directory of links
    to it laid over /etc, holding regular copies of the three resolver files."""
    real = resolver.root / "real-etc"
    fake = resolver.root / "fake-etc"
    real.mkdir()
    fake.mkdir()
    fake.chmod(0o755)
    regular = {
        "hosts": resolver.hosts.read_bytes(),
        "resolv.conf": resolver.resolv.read_bytes(),
        "nsswitch.conf": Path("/etc/nsswitch.conf").read_bytes(),
    }
    for entry in os.listdir("/etc"):
        if entry not in regular:
            (fake / entry).symlink_to(real / entry)
    for entry, content in regular.items():
        if entry == name:
            continue
        (fake / entry).write_bytes(content)
        (fake / entry).chmod(0o644)
    if shape == "symlink":
        target = _symlink_target(resolver, name)
        target.write_bytes(regular[name])
        target.chmod(0o644)
        (fake / name).symlink_to(target)
    return [("/etc", str(real)), (str(fake), "/etc")]


def _symlink_target(resolver: Resolver, name: str) -> Path:
    return resolver.root / f"{name}-target"


@pytest.mark.parametrize("shape", ["symlink", "missing"])
@pytest.mark.parametrize("name", ["hosts", "nsswitch.conf"])
def test_allow_dns_is_refused_where_the_host_file_is_a_symlink_or_missing(
    any_resolver: Resolver, name: str, shape: str
) -> None:
    resolver = any_resolver
    marker = resolver.sbx.workdir / "ran"
    binds = _fake_etc(resolver, name, shape)
    # The bind mounts themselves work: without --allow-dns the same run goes ahead.
    _ran(resolver.run("/usr/bin/true", flags=_port(443), binds=binds))
    run = resolver.run(
        "/usr/bin/touch", str(marker), flags=[*_dns(LISTED), *_port(443)], binds=binds
    )
    line = _refused(run, 1)
    assert f"/etc/{name}" in line, line
    assert not marker.exists()


@pytest.mark.parametrize("shape", ["symlink", "missing"])
def test_a_symlinked_or_missing_resolv_conf_is_not_refused_and_shows_no_name_server(
    any_resolver: Resolver, shape: str
) -> None:
    resolver = any_resolver
    binds = _fake_etc(resolver, "resolv.conf", shape)
    run = resolver.run(
        PYTHON, "-c", READ_RESOLVER_FILES, flags=[*_dns(LISTED), *_port(443)], binds=binds
    )
    _ran(run)
    seen = json.loads(run.stdout)
    assert seen["/etc/hosts"] == f"{LOOPBACK}127.0.0.1 {LISTED}\n"
    # Unreadable (EACCES), absent, or the run's own: never the host's name server.
    assert _nameserver_lines(seen["/etc/resolv.conf"]) == [], seen["/etc/resolv.conf"]
    resolved = resolver.run(
        GETENT, "hosts", LISTED, flags=[*_dns(LISTED), *_port(443)], binds=binds
    )
    _ran(resolved)
    assert resolved.stdout.split() == ["127.0.0.1", LISTED]
    if shape == "symlink":
        assert _symlink_target(resolver, "resolv.conf").read_text() == OUTER_RESOLV


# --- --dns-over-tcp ---------------------------------------------------------------------------


def test_dns_over_tcp_sets_res_options_use_vc_in_the_command_environment(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/usr/bin/env", flags=["--dns-over-tcp"], RES_OPTIONS="ndots:9")
    spawned = _ran(run)
    assert "RES_OPTIONS=use-vc" in run.stdout.splitlines()
    assert [line for line in run.stdout.splitlines() if line.startswith("RES_OPTIONS=")] == [
        "RES_OPTIONS=use-vc"
    ]
    assert spawned["dns_over_tcp"] is True
    assert spawned["dns_names"] == 0


def test_without_dns_over_tcp_the_command_has_no_res_options(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/usr/bin/env", RES_OPTIONS="ndots:9")
    spawned = _ran(run)
    assert not any(line.startswith("RES_OPTIONS=") for line in run.stdout.splitlines())
    assert spawned["dns_over_tcp"] is False


def test_dns_over_tcp_grants_nothing_else(sbx: Sandbx) -> None:
    without = _ran(sbx.sandbox_run("/bin/true"))
    with_tcp = _ran(sbx.sandbox_run("/bin/true", flags=["--dns-over-tcp"]))
    ignored = {"time", "spawn", "dns_over_tcp"}
    assert {k: v for k, v in with_tcp.items() if k not in ignored} == {
        k: v for k, v in without.items() if k not in ignored
    }
    assert with_tcp["network"] == "denied"
    assert with_tcp["network_ports"] == 0
    run = sbx.sandbox_run("/bin/cat", "/etc/resolv.conf", flags=["--dns-over-tcp"])
    assert run.record("exited")["code"] != 0
    assert "Permission denied" in run.stderr


def test_dns_over_tcp_lays_no_resolver_files_over_the_host(resolver: Resolver) -> None:
    run = resolver.run(
        PYTHON,
        "-c",
        READ_RESOLVER_FILES,
        flags=["--dns-over-tcp", "--allow-read", "/etc"],
    )
    _ran(run)
    seen = json.loads(run.stdout)
    assert seen["/etc/hosts"] == OUTER_HOSTS
    assert seen["/etc/resolv.conf"] == OUTER_RESOLV
    assert seen["/etc/nsswitch.conf"] == Path("/etc/nsswitch.conf").read_text(
        encoding="utf-8", errors="surrogateescape"
    )
