"""Each seccomp rule on the real kernel, through the CLI: a probe makes the call with ctypes.

Each refused probe also runs unfiltered in a plain user namespace, where its answer differs.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandbx.boundary._seccomp import DENIED_WITH_EPERM, SYSCALL_NUMBERS
from tests.support import SANDBX, Run, Sandbx, parse_records, running_as_root

pytestmark = pytest.mark.boundary

MACHINE = platform.machine()
# The system floor grants /usr, so this interpreter runs inside the sandbox.
PYTHON = "/usr/bin/python3"
# The positive controls: the same probe with no seccomp filter, in namespaces
# like the sandbox's, as root of its own user namespace (full capabilities there).
UNSHARE = ("unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork", "--net")
SIGSYS_EXIT = 128 + 31

# Syscall numbers from the installed kernel headers, an oracle independent of
# sandbx's tables; a call newer than the headers falls back to sandbx's table.
KERNEL_HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),
}

# Prints OK when the call succeeds, else the errno's name.
PRELUDE = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def call(nr, *args):
    words = [ctypes.c_ulong(a) if isinstance(a, int) else a for a in args]
    ctypes.set_errno(0)
    return libc.syscall(ctypes.c_long(nr), *words)

def clone(nr, flags):
    pid = call(nr, flags, 0, 0, 0, 0)
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    return pid

def report(result):
    print("OK" if result >= 0 else errno.errorcode[ctypes.get_errno()])
"""

# The sandboxed command is a session leader without a terminal (sandbx calls
# setsid); the probe makes the inherited pty its controlling terminal, on which
# the kernel itself allows TIOCSTI to anyone, so a refusal can only be seccomp's.
TERMINAL_PRELUDE = """
import fcntl, termios
try:
    os.setsid()
except PermissionError:
    pass
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
"""

# include/uapi/asm-generic/ioctls.h
TCGETS = 0x5401
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
UPPER_HALF = 0xFFFFFFFF_00000000
# arch/x86/include/uapi/asm/unistd.h
X32_SYSCALL_BIT = 0x40000000

# An i386 getpid through int 0x80: mov eax, 20; int 0x80; ret.
I386_GETPID = """
import mmap
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(b"\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\xc3")
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
print("OK" if ctypes.CFUNCTYPE(ctypes.c_int)(address)() > 0 else "FAILED")
"""


@functools.cache
def kernel_numbers() -> dict[str, int]:
    header = KERNEL_HEADERS.get(MACHINE)
    if header is None or not header.is_file():
        return {}
    found = re.findall(r"^#define __NR_(\w+)\s+(\d+)\s*$", header.read_text(), re.MULTILINE)
    return {name: int(number) for name, number in found}


def number(name: str) -> int:
    if name in kernel_numbers():
        return kernel_numbers()[name]
    table = SYSCALL_NUMBERS.get(MACHINE, {})
    if name in table:  # open_tree_attr (Linux 6.15) is newer than many headers
        return table[name]
    pytest.skip(f"no syscall number for {name} on {MACHINE}: not in the headers nor sandbx")


@dataclass(frozen=True)
class Probe:
    """One syscall with arguments chosen so that, unfiltered, the kernel answers ``unfiltered``."""

    call: str
    args: str
    unfiltered: tuple[str, ...]
    why: str
    via: str = "call"
    label: str = ""
    # The kernel checks a capability of the initial user namespace first, so
    # a user namespace cannot show the call unfiltered; only root can.
    initial_namespace: bool = False

    @property
    def id(self) -> str:
        return self.label or self.call

    def code(self) -> str:
        return PRELUDE + f"report({self.via}({number(self.call)}, {self.args}))\n"


ABSENT = "b'/nonexistent-sandbx-probe'"
# Where the kernel checks a capability before the arguments (fsopen, fsmount,
# fspick, move_mount, pivot_root, reboot, swapoff), the capability-less command
# would get EPERM from the kernel too: there the sandbox run proves the call is
# refused, the evaluator tests prove the rule, and the control shows the probe
# reaches the call. Every other probe gets a different answer from the kernel
# with or without capabilities, so its EPERM in the sandbox is the filter's.
REFUSED = (
    Probe("ptrace", "16, 0x7FFFFFFF, 0, 0", ("ESRCH",), "PTRACE_ATTACH to no pid: lookup first"),
    Probe("process_vm_readv", "os.getpid(), 0, 0, 0, 0, 0", ("OK",), "no iovecs: returns 0"),
    Probe("process_vm_writev", "os.getpid(), 0, 0, 0, 0, 0", ("OK",), "no iovecs: returns 0"),
    Probe("pidfd_open", "os.getpid(), 0", ("OK",), "a pidfd for oneself needs no privilege"),
    Probe("pidfd_getfd", "-1, 0, 0", ("EBADF",), "no pidfd"),
    Probe("mount", f"b'none', {ABSENT}, b'tmpfs', 0, 0", ("ENOENT",), "target looked up first"),
    Probe("umount2", "b'/', 0x100", ("EINVAL",), "unknown flag, checked first"),
    Probe("fsopen", "b'tmpfs', 0", ("OK",), "tmpfs may be mounted in a user namespace"),
    Probe("fsconfig", "-1, 0, 0, 0, 0", ("EINVAL",), "a negative fd is refused first"),
    Probe("fsmount", "-1, 0, 0", ("EBADF",), "no fs context"),
    Probe("fspick", "-100, b'/', 0x1000", ("EINVAL",), "unknown flag"),
    Probe("open_tree", "-100, b'/', 0", ("OK",), "no OPEN_TREE_CLONE: an O_PATH open"),
    Probe("open_tree_attr", "-100, b'/', 0, 0, 0", ("OK",), "as open_tree, with no attributes"),
    Probe("move_mount", "-1, b'', -1, b'', 0x10000", ("EINVAL",), "unknown flag"),
    Probe("mount_setattr", "-100, b'/', 0x80000000, 0, 0", ("EINVAL",), "unknown flag, first"),
    Probe("pivot_root", f"{ABSENT}, {ABSENT}", ("ENOENT",), "no such new root"),
    Probe("chroot", ABSENT, ("ENOENT",), "path looked up before CAP_SYS_CHROOT"),
    Probe("setns", "-1, 0", ("EBADF",), "no namespace fd"),
    Probe("unshare", "0x10000000", ("OK",), "CLONE_NEWUSER needs no privilege"),
    Probe(
        "clone",
        "0x10000000 | 17",
        ("OK",),
        "CLONE_NEWUSER | SIGCHLD forks into a new user namespace; the child _exits at once",
        via="clone",
        label="clone-CLONE_NEWUSER",
    ),
    # Without CONFIG_MODULES or CONFIG_KEXEC* the kernel answers ENOSYS.
    Probe(
        "init_module", "0, 0, b''", ("ENOSYS", "ENOEXEC"), "an empty image", initial_namespace=True
    ),
    Probe("finit_module", "-1, b'', 0", ("ENOSYS", "EBADF"), "no fd", initial_namespace=True),
    Probe(
        "delete_module",
        "b'sandbx_probe_absent', os.O_NONBLOCK",
        ("ENOSYS", "ENOENT"),
        "no such module",
        initial_namespace=True,
    ),
    Probe(
        "kexec_load",
        "0, 1000, 0, 0",
        ("ENOSYS", "EINVAL"),
        "over KEXEC_SEGMENT_MAX",
        initial_namespace=True,
    ),
    Probe(
        "kexec_file_load",
        "-1, -1, 0, 0, 0x100",
        ("ENOSYS", "EINVAL"),
        "unknown flag",
        initial_namespace=True,
    ),
    # Kernels before 6.9 check kernel.unprivileged_bpf_disabled before the command.
    Probe("bpf", "0x7FFFFFFF, 0, 0", ("EINVAL",), "unknown command", initial_namespace=True),
    Probe("add_key", "b'user', b'sandbx-probe', 0, 1 << 20, -2", ("EINVAL",), "payload over 1 MiB"),
    Probe("request_key", "b'user', b'sandbx-probe-absent', 0, 0", ("ENOKEY",), "no such key"),
    Probe("keyctl", "0x7FFF, 0, 0, 0, 0", ("ENOTSUP",), "unknown operation"),
    Probe("perf_event_open", "0, 0, -1, -1, 0x80000000", ("EINVAL",), "unknown flag, first"),
    Probe("userfaultfd", "1", ("OK",), "UFFD_USER_MODE_ONLY is open to anyone (5.11+)"),
    # kernel.io_uring_disabled=1 leaves io_uring to CAP_SYS_ADMIN (initial namespace).
    Probe("io_uring_setup", "1, 0", ("EFAULT",), "no params", initial_namespace=True),
    Probe("io_uring_enter", "-1, 0, 0, 0, 0, 0", ("EBADF",), "no ring"),
    # Linux 6.13+ takes fd -1 as a ring-less registration, which only knows one opcode.
    Probe("io_uring_register", "-1, 0, 0, 0", ("EINVAL", "EBADF"), "no ring"),
    Probe("memfd_create", "b'sandbx-probe', 0", ("OK",), "anyone may make one"),
    Probe("reboot", "0, 0, 0, 0", ("EINVAL",), "bad magic, after CAP_SYS_BOOT of the pid ns"),
    Probe("swapon", f"{ABSENT}, 0x7FFFFFFF", ("EINVAL",), "unknown flags, before the capability"),
    Probe("swapoff", ABSENT, ("ENOENT",), "no such file", initial_namespace=True),
    # Open to anyone where kernel.dmesg_restrict=0; else CAP_SYSLOG of the initial namespace.
    Probe("syslog", "10, 0, 0", ("OK",), "SYSLOG_ACTION_SIZE_BUFFER", initial_namespace=True),
    Probe("socket", "1, 1, 0", ("OK",), "AF_UNIX, SOCK_STREAM", label="socket-AF_UNIX"),
    Probe(
        "socketpair",
        "1, 2, 0, (ctypes.c_int * 2)()",
        ("OK",),
        "AF_UNIX, SOCK_DGRAM",
        label="socketpair-AF_UNIX-SOCK_DGRAM",
    ),
)

ALLOWED = (
    Probe("socket", "2, 1, 0", ("OK",), "AF_INET, SOCK_STREAM", label="socket-AF_INET"),
    Probe("socket", "10, 2, 0", ("OK",), "AF_INET6, SOCK_DGRAM", label="socket-AF_INET6"),
    Probe(
        "socketpair",
        "1, 1, 0, (ctypes.c_int * 2)()",
        ("OK",),
        "AF_UNIX, SOCK_STREAM",
        label="socketpair-AF_UNIX-SOCK_STREAM",
    ),
    Probe(
        "socketpair",
        "1, 5 | os.O_NONBLOCK | os.O_CLOEXEC, 0, (ctypes.c_int * 2)()",
        ("OK",),
        "AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC (same bits as O_*)",
        label="socketpair-AF_UNIX-SOCK_SEQPACKET",
    ),
    Probe("clone", "17", ("OK",), "SIGCHLD only: a plain fork", via="clone", label="clone-fork"),
    Probe("getpid", "", ("OK",), "an ordinary call"),
)


# --- running a probe -----------------------------------------------------------


def sandboxed(sbx: Sandbx, code: str, flags: Sequence[str] = ()) -> Run:
    if not Path(PYTHON).is_file():
        pytest.skip(f"{PYTHON} is not installed")
    return sbx.sandbox_run(PYTHON, "-c", code, flags=flags)


def answer_in_sandbox(sbx: Sandbx, code: str) -> str:
    run = sandboxed(sbx, code)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def unconfined(
    sbx: Sandbx, code: str, *, namespaces: bool = True
) -> subprocess.CompletedProcess[str]:
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed, so there is no unfiltered control")
    argv = [*UNSHARE, PYTHON, "-c", code] if namespaces else [PYTHON, "-c", code]
    completed = subprocess.run(
        argv,
        cwd=sbx.workdir,
        env=sbx.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if completed.returncode != 0 and completed.stderr.startswith("unshare:"):
        pytest.skip(f"no user namespace for the control: {completed.stderr.strip()}")
    return completed


def answer_unfiltered(sbx: Sandbx, probe: Probe) -> str:
    completed = unconfined(sbx, probe.code())
    assert completed.returncode == 0, completed.stderr
    answer = completed.stdout.strip()
    if answer == "EPERM" and probe.initial_namespace:
        if not running_as_root():
            pytest.skip(
                f"{probe.call} wants a capability of the initial user namespace; "
                "only root can show it unfiltered"
            )
        completed = unconfined(sbx, probe.code(), namespaces=False)
        assert completed.returncode == 0, completed.stderr
        answer = completed.stdout.strip()
        if answer == "EPERM":
            pytest.skip(f"this kernel refuses {probe.call} even to root (a sysctl or lockdown)")
    return answer


@dataclass
class TerminalRun:
    returncode: int
    stdout: str
    stderr: str
    echoed: bytes


def on_terminal(sbx: Sandbx, argv: Sequence[str]) -> TerminalRun:
    """Run ``argv`` with a fresh pty as its stdin; ``echoed`` is what reached the terminal."""
    master, slave = os.openpty()
    try:
        completed = subprocess.run(
            argv,
            cwd=sbx.workdir,
            env=sbx.env,
            stdin=slave,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        os.set_blocking(master, False)
        try:
            echoed = os.read(master, 4096)
        except BlockingIOError:
            echoed = b""
    finally:
        os.close(master)
        os.close(slave)
    return TerminalRun(completed.returncode, completed.stdout, completed.stderr, echoed)


def ioctl_code(code: int) -> str:
    return PRELUDE + TERMINAL_PRELUDE + f"report(call({number('ioctl')}, 0, {code}, b'x'))\n"


def tiocsti_unfiltered() -> tuple[str, bytes]:
    """What TIOCSTI does unfiltered, and the byte it puts on the terminal."""
    # drivers/tty/tty_io.c: with dev.tty.legacy_tiocsti=0 the kernel refuses
    # TIOCSTI with EIO to anyone without CAP_SYS_ADMIN in the initial namespace.
    setting = Path("/proc/sys/dev/tty/legacy_tiocsti")
    if setting.is_file() and setting.read_text().strip() == "0":
        return "EIO", b""
    return "OK", b"x"


# --- the refused calls -----------------------------------------------------------


def test_every_refused_call_has_a_probe() -> None:
    assert set(DENIED_WITH_EPERM) <= {probe.call for probe in REFUSED}


@pytest.mark.parametrize("probe", REFUSED, ids=lambda probe: probe.id)
def test_refused_call_gets_eperm_in_the_sandbox(sbx: Sandbx, probe: Probe) -> None:
    assert answer_in_sandbox(sbx, probe.code()) == "EPERM", probe.why


@pytest.mark.parametrize("probe", REFUSED, ids=lambda probe: probe.id)
def test_refused_call_probe_gets_another_answer_without_the_filter(
    sbx: Sandbx, probe: Probe
) -> None:
    assert answer_unfiltered(sbx, probe) in probe.unfiltered, probe.why


CLONE3 = Probe("clone3", "0, 0", ("EINVAL",), "a size below CLONE_ARGS_SIZE_VER0")


def test_clone3_gets_enosys_in_the_sandbox(sbx: Sandbx) -> None:
    assert answer_in_sandbox(sbx, CLONE3.code()) == "ENOSYS"


def test_clone3_probe_gets_einval_without_the_filter(sbx: Sandbx) -> None:
    assert answer_unfiltered(sbx, CLONE3) in CLONE3.unfiltered


def test_threads_start_although_clone3_is_refused(sbx: Sandbx) -> None:
    # glibc's pthread_create tries clone3 and falls back to clone on ENOSYS.
    code = "import threading\nt = threading.Thread(target=print, args=('OK',))\nt.start(); t.join()"
    assert answer_in_sandbox(sbx, code) == "OK"


def test_a_subprocess_starts_although_clone3_is_refused(sbx: Sandbx) -> None:
    # posix_spawn, as subprocess uses it, also tries clone3 first.
    code = "import subprocess\nprint(subprocess.run(['/usr/bin/true']).returncode)"
    assert answer_in_sandbox(sbx, code) == "0"


# --- the allowed calls -------------------------------------------------------------


@pytest.mark.parametrize("probe", ALLOWED, ids=lambda probe: probe.id)
def test_allowed_call_succeeds_in_the_sandbox(sbx: Sandbx, probe: Probe) -> None:
    assert answer_in_sandbox(sbx, probe.code()) == "OK", probe.why


# --- terminal injection -------------------------------------------------------------


@pytest.mark.parametrize(
    "code", [TIOCSTI, UPPER_HALF | TIOCSTI], ids=["TIOCSTI", "TIOCSTI-upper-half"]
)
def test_tiocsti_on_a_terminal_gets_eperm_in_the_sandbox(sbx: Sandbx, code: int) -> None:
    run = on_terminal(sbx, [*SANDBX, "sandbox-run", "--", PYTHON, "-c", ioctl_code(code)])
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "EPERM"
    assert b"x" not in run.echoed
    assert [r["decision"] for r in parse_records(run.stderr)] == ["spawned", "exited"]


@pytest.mark.parametrize(
    "code", [TIOCSTI, UPPER_HALF | TIOCSTI], ids=["TIOCSTI", "TIOCSTI-upper-half"]
)
def test_tiocsti_probe_injects_a_byte_without_the_filter(sbx: Sandbx, code: int) -> None:
    # ioctl's request is an unsigned int: the kernel drops the upper half too.
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed, so there is no unfiltered control")
    run = on_terminal(sbx, [*UNSHARE, PYTHON, "-c", ioctl_code(code)])
    assert run.returncode == 0, run.stderr
    answer, echoed = tiocsti_unfiltered()
    assert run.stdout.strip() == answer
    assert run.echoed == echoed


def test_tioclinux_gets_eperm_in_the_sandbox(sbx: Sandbx) -> None:
    run = on_terminal(sbx, [*SANDBX, "sandbox-run", "--", PYTHON, "-c", ioctl_code(TIOCLINUX)])
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "EPERM"


def test_tioclinux_probe_gets_enotty_without_the_filter(sbx: Sandbx) -> None:
    # A pty is no virtual console: the kernel does not know the request there.
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed, so there is no unfiltered control")
    run = on_terminal(sbx, [*UNSHARE, PYTHON, "-c", ioctl_code(TIOCLINUX)])
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ENOTTY"


def test_tcgets_on_a_terminal_is_allowed_in_the_sandbox(sbx: Sandbx) -> None:
    run = on_terminal(sbx, [*SANDBX, "sandbox-run", "--", PYTHON, "-c", ioctl_code(TCGETS)])
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "OK"


# --- architecture ------------------------------------------------------------------


x86_64_only = pytest.mark.skipif(MACHINE != "x86_64", reason="x32 and i386 are x86_64's ABIs")


def x32_getpid() -> str:
    return PRELUDE + f"report(call({X32_SYSCALL_BIT | number('getpid')}))\n"


@x86_64_only
def test_an_x32_syscall_kills_the_sandboxed_process_with_sigsys(sbx: Sandbx) -> None:
    run = sandboxed(sbx, x32_getpid())
    assert run.returncode == SIGSYS_EXIT, run.stderr
    assert run.stdout == ""
    assert run.record("exited")["code"] == SIGSYS_EXIT


@x86_64_only
def test_an_x32_syscall_probe_is_not_killed_without_the_filter(sbx: Sandbx) -> None:
    # A kernel without CONFIG_X86_X32_ABI answers ENOSYS; with it, getpid works.
    completed = unconfined(sbx, x32_getpid())
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() in ("ENOSYS", "OK")


@x86_64_only
def test_an_i386_syscall_kills_the_sandboxed_process_with_sigsys(sbx: Sandbx) -> None:
    if unconfined(sbx, PRELUDE + I386_GETPID).stdout.strip() != "OK":
        pytest.skip("this kernel runs no i386 syscalls (no IA32 emulation)")
    run = sandboxed(sbx, PRELUDE + I386_GETPID)
    assert run.returncode == SIGSYS_EXIT, run.stderr
    assert run.record("exited")["code"] == SIGSYS_EXIT


@x86_64_only
def test_an_i386_syscall_probe_works_without_the_filter(sbx: Sandbx) -> None:
    completed = unconfined(sbx, PRELUDE + I386_GETPID)
    if completed.returncode != 0:
        pytest.skip(f"this kernel runs no i386 syscalls (exit {completed.returncode})")
    assert completed.stdout.strip() == "OK"


# --- the process's own view -----------------------------------------------------------


def sandboxed_status(sbx: Sandbx) -> dict[str, str]:
    # /proc is not granted by default; --allow-read /proc grants the sandbox's own.
    code = "print(open('/proc/self/status').read())"
    run = sandboxed(sbx, code, flags=["--allow-read", "/proc"])
    assert run.returncode == 0, run.stderr
    fields = (line.split(":\t", 1) for line in run.stdout.splitlines() if ":\t" in line)
    return {name: value.strip() for name, value in fields}


def test_the_sandboxed_process_runs_under_a_seccomp_filter(sbx: Sandbx) -> None:
    assert sandboxed_status(sbx)["Seccomp"] == "2"


def test_the_sandboxed_process_has_no_new_privs(sbx: Sandbx) -> None:
    assert sandboxed_status(sbx)["NoNewPrivs"] == "1"


def test_the_sandboxed_process_holds_no_capability(sbx: Sandbx) -> None:
    status = sandboxed_status(sbx)
    sets = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
    assert {name: int(status[name], 16) for name in sets} == dict.fromkeys(sets, 0)
