"""The filesystem half of the boundary, proven through the real CLI on the real kernel.

Each denial sits beside its positive control and checks the host, not only an exit code.
"""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import Run, Sandbx

pytestmark = pytest.mark.boundary

OUTSIDE_TEXT = "outside every grant\n"
ORIGINAL = "original\n"
# What a command prints when the kernel refuses it: EACCES from Landlock, EXDEV
# from Landlock's refer check on links and renames, EPERM should a seccomp
# filter answer instead.
_REFUSALS = (
    "Permission denied",
    "Invalid cross-device link",
    "Operation not permitted",
    "Read-only file system",
)


def _assert_ran(run: Run) -> None:
    assert run.returncode == 0, run.stderr
    assert run.record("exited")["code"] == 0


def _assert_refused(run: Run) -> None:
    """The command started, and the kernel refused what it tried."""
    assert run.record("exited")["code"] != 0, run.stderr
    assert any(refusal in run.stderr for refusal in _REFUSALS), run.stderr


def _outside(tmp_path: Path) -> Path:
    """A directory beside the working directory, under no grant, holding one private file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.txt").write_text(OUTSIDE_TEXT)
    (outside / "private.txt").chmod(0o644)
    return outside


def _state(path: Path) -> tuple[object, ...]:
    """What a change to a file or directory would show: its bytes, identity, times and mode."""
    status = path.lstat()
    content: bytes | str | None = None
    if path.is_symlink():
        content = os.readlink(path)
    elif path.is_file():
        content = path.read_bytes()
    return (
        content,
        status.st_ino,
        status.st_nlink,
        stat.S_IMODE(status.st_mode),
        status.st_mtime_ns,
        status.st_ctime_ns,
    )


def _tree(root: Path) -> dict[str, tuple[object, ...]]:
    return {str(path.relative_to(root)): _state(path) for path in [root, *sorted(root.rglob("*"))]}


# --- the default policy ------------------------------------------------------


def test_default_policy_reads_the_working_directory(sbx: Sandbx) -> None:
    (sbx.workdir / "notes.txt").write_text("in the project\n")
    run = sbx.sandbox_run("cat", "notes.txt")
    _assert_ran(run)
    assert run.stdout == "in the project\n"


def test_default_policy_writes_the_working_directory(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("sh", "-c", "echo made > made.txt")
    _assert_ran(run)
    assert (sbx.workdir / "made.txt").read_text() == "made\n"


def test_default_policy_reads_the_system_directories(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("od", "-An", "-c", "-N4", "/usr/bin/true")
    _assert_ran(run)
    assert run.stdout.split() == ["177", "E", "L", "F"]


def test_default_policy_runs_programs_from_the_system_directories(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/usr/bin/env", "/bin/sh", "-c", "exit 7")
    assert run.returncode == 7, run.stderr
    assert run.record("exited")["code"] == 7


def test_default_policy_cannot_write_the_system_directories(sbx: Sandbx) -> None:
    probe = Path(f"/usr/sandbx-probe-{uuid.uuid4().hex}")
    try:
        run = sbx.sandbox_run("touch", str(probe))
        _assert_refused(run)
        assert not probe.exists()
    finally:
        probe.unlink(missing_ok=True)


def test_default_policy_cannot_read_a_file_beside_the_working_directory(
    sbx: Sandbx, tmp_path: Path
) -> None:
    outside = _outside(tmp_path)
    run = sbx.sandbox_run("cat", str(outside / "private.txt"))
    _assert_refused(run)
    assert run.stdout == ""


def test_read_grant_reads_a_file_beside_the_working_directory(sbx: Sandbx, tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    run = sbx.sandbox_run("cat", str(outside / "private.txt"), flags=["--allow-read", str(outside)])
    _assert_ran(run)
    assert run.stdout == OUTSIDE_TEXT


def test_default_policy_cannot_list_a_directory_beside_the_working_directory(
    sbx: Sandbx, tmp_path: Path
) -> None:
    outside = _outside(tmp_path)
    run = sbx.sandbox_run("ls", str(outside))
    _assert_refused(run)
    assert "private.txt" not in run.stdout


def test_default_policy_cannot_write_a_file_beside_the_working_directory(
    sbx: Sandbx, tmp_path: Path
) -> None:
    outside = _outside(tmp_path)
    before = _tree(outside)
    run = sbx.sandbox_run("sh", "-c", f"echo changed >> {outside}/private.txt")
    _assert_refused(run)
    assert _tree(outside) == before


def test_default_policy_cannot_create_a_file_beside_the_working_directory(
    sbx: Sandbx, tmp_path: Path
) -> None:
    outside = _outside(tmp_path)
    before = _tree(outside)
    run = sbx.sandbox_run("sh", "-c", f"echo made > {outside}/made.txt")
    _assert_refused(run)
    assert _tree(outside) == before


def test_write_grant_writes_a_file_beside_the_working_directory(
    sbx: Sandbx, tmp_path: Path
) -> None:
    outside = _outside(tmp_path)
    run = sbx.sandbox_run(
        "sh", "-c", f"echo changed >> {outside}/private.txt", flags=["--allow-write", str(outside)]
    )
    _assert_ran(run)
    assert (outside / "private.txt").read_text() == OUTSIDE_TEXT + "changed\n"


def test_default_policy_cannot_change_the_mode_of_a_file_outside_it(
    sbx: Sandbx, tmp_path: Path
) -> None:
    outside = _outside(tmp_path)
    before = _tree(outside)
    run = sbx.sandbox_run("chmod", "666", str(outside / "private.txt"))
    _assert_refused(run)
    assert _tree(outside) == before


def test_default_policy_cannot_set_the_times_of_a_file_outside_it(
    sbx: Sandbx, tmp_path: Path
) -> None:
    outside = _outside(tmp_path)
    before = _tree(outside)
    run = sbx.sandbox_run("touch", "-d", "@946684800", str(outside / "private.txt"))
    _assert_refused(run)
    assert _tree(outside) == before


def test_default_policy_cannot_read_etc(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("cat", "/etc/passwd")
    _assert_refused(run)
    assert run.stdout == ""


def test_read_grant_on_etc_reads_it(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("cat", "/etc/passwd", flags=["--allow-read", "/etc"])
    _assert_ran(run)
    assert run.stdout == Path("/etc/passwd").read_text()


def test_default_policy_cannot_write_dev_null(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("sh", "-c", "echo discarded > /dev/null")
    _assert_refused(run)
    assert stat.S_ISCHR(Path("/dev/null").stat().st_mode)


def test_write_grant_on_dev_null_lets_the_command_write_to_it(sbx: Sandbx) -> None:
    run = sbx.sandbox_run(
        "sh", "-c", "echo discarded > /dev/null", flags=["--allow-write", "/dev/null"]
    )
    _assert_ran(run)


def test_write_grant_on_dev_null_lets_the_command_open_it_read_write(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("sh", "-c", "exec 3<>/dev/null", flags=["--allow-write", "/dev/null"])
    _assert_ran(run)


def test_read_grant_on_dev_null_does_not_let_the_command_open_it_read_write(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("sh", "-c", "exec 3<>/dev/null", flags=["--allow-read", "/dev"])
    _assert_refused(run)


# --- any path flag replaces the working-directory default --------------------

PATH_FLAGS = ("--allow-read", "--allow-write", "--allow-exec")


@pytest.mark.parametrize("flag", PATH_FLAGS)
def test_a_path_flag_takes_away_reading_the_working_directory(
    sbx: Sandbx, tmp_path: Path, flag: str
) -> None:
    (sbx.workdir / "notes.txt").write_text("in the project\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = sbx.sandbox_run("cat", "notes.txt", flags=[flag, str(elsewhere)])
    _assert_refused(run)
    assert run.stdout == ""


@pytest.mark.parametrize("flag", PATH_FLAGS)
def test_a_path_flag_takes_away_writing_the_working_directory(
    sbx: Sandbx, tmp_path: Path, flag: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = _tree(sbx.workdir)
    run = sbx.sandbox_run("sh", "-c", "echo made > made.txt", flags=[flag, str(elsewhere)])
    _assert_refused(run)
    assert _tree(sbx.workdir) == before


def test_a_path_flag_naming_the_working_directory_grants_it_again(sbx: Sandbx) -> None:
    (sbx.workdir / "notes.txt").write_text("in the project\n")
    run = sbx.sandbox_run("cat", "notes.txt", flags=["--allow-read", "."])
    _assert_ran(run)
    assert run.stdout == "in the project\n"


# --- what each axis allows: read, write (and the default), exec --------------


@dataclass(frozen=True, slots=True)
class Change:
    """One way to change a granted tree, and how the host shows it happened."""

    shell: str
    happened: Callable[[Path], bool]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


CHANGES = {
    "write_to_a_file": Change(
        "echo changed >> file.txt",
        lambda d: (d / "file.txt").read_text() == ORIGINAL + "changed\n",
    ),
    "create_a_file": Change("echo new > new.txt", lambda d: (d / "new.txt").read_text() == "new\n"),
    "delete_a_file": Change("rm file.txt", lambda d: not (d / "file.txt").exists()),
    "rename_a_file": Change(
        "mv file.txt renamed.txt",
        lambda d: not (d / "file.txt").exists() and (d / "renamed.txt").read_text() == ORIGINAL,
    ),
    "make_a_directory": Change("mkdir made", lambda d: (d / "made").is_dir()),
    "remove_a_directory": Change("rmdir sub", lambda d: not (d / "sub").exists()),
    "truncate": Change("truncate -s0 file.txt", lambda d: (d / "file.txt").read_text() == ""),
    "truncate_on_open": Change(": > file.txt", lambda d: (d / "file.txt").read_text() == ""),
    "make_a_hard_link": Change(
        "ln file.txt hard.txt",
        lambda d: (d / "hard.txt").stat().st_ino == (d / "file.txt").stat().st_ino,
    ),
    "make_a_symlink": Change(
        "ln -s file.txt soft.txt", lambda d: os.readlink(d / "soft.txt") == "file.txt"
    ),
    "make_a_fifo": Change("mkfifo fifo", lambda d: stat.S_ISFIFO((d / "fifo").lstat().st_mode)),
    "set_a_files_times": Change(
        "touch -d @946684800 file.txt", lambda d: (d / "file.txt").stat().st_mtime == 946684800
    ),
    "change_a_files_mode": Change("chmod 600 file.txt", lambda d: _mode(d / "file.txt") == 0o600),
    "set_an_extended_attribute": Change(
        "python3 -c \"import os; os.setxattr('file.txt', 'user.sandbx', b'1')\"",
        lambda d: os.getxattr(d / "file.txt", "user.sandbx") == b"1",
    ),
}


def _granted_tree(tmp_path: Path) -> Path:
    granted = tmp_path / "granted"
    granted.mkdir()
    (granted / "file.txt").write_text(ORIGINAL)
    (granted / "file.txt").chmod(0o644)
    (granted / "sub").mkdir()
    return granted


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_read_grant_does_not_allow(sbx: Sandbx, tmp_path: Path, change: Change) -> None:
    granted = _granted_tree(tmp_path)
    before = _tree(granted)
    run = sbx.sandbox_run("sh", "-c", change.shell, flags=["--allow-read", "."], cwd=granted)
    _assert_refused(run)
    assert _tree(granted) == before


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_exec_grant_does_not_allow(sbx: Sandbx, tmp_path: Path, change: Change) -> None:
    granted = _granted_tree(tmp_path)
    before = _tree(granted)
    run = sbx.sandbox_run("sh", "-c", change.shell, flags=["--allow-exec", "."], cwd=granted)
    _assert_refused(run)
    assert _tree(granted) == before


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_write_grant_allows(sbx: Sandbx, tmp_path: Path, change: Change) -> None:
    granted = _granted_tree(tmp_path)
    run = sbx.sandbox_run("sh", "-c", change.shell, flags=["--allow-write", "."], cwd=granted)
    _assert_ran(run)
    assert change.happened(granted)


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_default_policy_allows_in_the_working_directory(sbx: Sandbx, change: Change) -> None:
    granted = sbx.workdir
    (granted / "file.txt").write_text(ORIGINAL)
    (granted / "file.txt").chmod(0o644)
    (granted / "sub").mkdir()
    run = sbx.sandbox_run("sh", "-c", change.shell)
    _assert_ran(run)
    assert change.happened(granted)


def test_read_grant_reads_files_and_lists_the_directory(sbx: Sandbx, tmp_path: Path) -> None:
    granted = _granted_tree(tmp_path)
    run = sbx.sandbox_run("sh", "-c", "ls; cat file.txt", flags=["--allow-read", "."], cwd=granted)
    _assert_ran(run)
    assert run.stdout == "file.txt\nsub\n" + ORIGINAL


def test_exec_grant_reads_files_and_lists_the_directory(sbx: Sandbx, tmp_path: Path) -> None:
    granted = _granted_tree(tmp_path)
    run = sbx.sandbox_run("sh", "-c", "ls; cat file.txt", flags=["--allow-exec", "."], cwd=granted)
    _assert_ran(run)
    assert run.stdout == "file.txt\nsub\n" + ORIGINAL


# --- write does not imply execute --------------------------------------------


def _copy_true(directory: Path) -> Path:
    program = directory / "mytrue"
    shutil.copyfile("/usr/bin/true", program)
    program.chmod(0o755)
    return program


SCRIPT = (
    "printf '#!/bin/sh\\necho ran > ran.txt\\n' > script.sh && chmod +x script.sh && ./script.sh"
)


def test_write_grant_does_not_run_a_program_copied_into_it(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("sh", "-c", "cp /usr/bin/true ./mytrue && ./mytrue")
    assert run.record("exited")["code"] == 126, run.stderr
    assert "Permission denied" in run.stderr
    assert (sbx.workdir / "mytrue").read_bytes() == Path("/usr/bin/true").read_bytes()


def test_exec_grant_runs_a_program_copied_into_a_write_grant(sbx: Sandbx) -> None:
    run = sbx.sandbox_run(
        "sh",
        "-c",
        "cp /usr/bin/true ./mytrue && ./mytrue",
        flags=["--allow-write", ".", "--allow-exec", "."],
    )
    _assert_ran(run)


def test_write_grant_does_not_run_a_script_written_into_it(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("sh", "-c", SCRIPT)
    assert run.record("exited")["code"] == 126, run.stderr
    assert (sbx.workdir / "script.sh").exists()
    assert not (sbx.workdir / "ran.txt").exists()


def test_exec_grant_runs_a_script_written_into_a_write_grant(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("sh", "-c", SCRIPT, flags=["--allow-write", ".", "--allow-exec", "."])
    _assert_ran(run)
    assert (sbx.workdir / "ran.txt").read_text() == "ran\n"


def _dynamic_loader() -> str:
    for candidate in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"):
        if os.path.exists(candidate):
            return candidate
    pytest.skip("no known dynamic loader on this host")


def test_write_grant_does_not_run_a_program_through_the_dynamic_loader(sbx: Sandbx) -> None:
    loader = _dynamic_loader()
    run = sbx.sandbox_run("sh", "-c", f"cp /usr/bin/touch ./mytouch && {loader} ./mytouch ran.txt")
    assert run.record("exited")["code"] != 0, run.stderr
    assert (sbx.workdir / "mytouch").exists()
    assert not (sbx.workdir / "ran.txt").exists()


def test_exec_grant_runs_a_program_through_the_dynamic_loader(sbx: Sandbx) -> None:
    loader = _dynamic_loader()
    run = sbx.sandbox_run(
        "sh",
        "-c",
        f"cp /usr/bin/touch ./mytouch && {loader} ./mytouch ran.txt",
        flags=["--allow-write", ".", "--allow-exec", "."],
    )
    _assert_ran(run)
    assert (sbx.workdir / "ran.txt").exists()


def test_write_grant_refuses_the_program_after_the_separator(sbx: Sandbx) -> None:
    _copy_true(sbx.workdir)
    run = sbx.sandbox_run("./mytrue")
    assert run.returncode == 1
    failed = run.record("failed")
    assert failed["reason"] == "exec_failed"
    assert "EACCES" in str(failed["detail"])
    assert [r["decision"] for r in run.records] == ["spawned", "failed"]
    assert len(run.messages) == 1
    assert "--allow-exec" in run.messages[0]


def test_exec_grant_runs_the_program_after_the_separator(sbx: Sandbx) -> None:
    _copy_true(sbx.workdir)
    run = sbx.sandbox_run("./mytrue", flags=["--allow-exec", "."])
    _assert_ran(run)


def test_read_grant_refuses_the_program_after_the_separator(sbx: Sandbx) -> None:
    _copy_true(sbx.workdir)
    run = sbx.sandbox_run("./mytrue", flags=["--allow-read", "."])
    assert run.returncode == 1
    assert run.record("failed")["reason"] == "exec_failed"


# --- grants on single files --------------------------------------------------


def _file_and_sibling(tmp_path: Path) -> tuple[Path, Path]:
    outside = _outside(tmp_path)
    sibling = outside / "sibling.txt"
    sibling.write_text("the sibling\n")
    return outside / "private.txt", sibling


def test_read_grant_on_a_file_reads_it(sbx: Sandbx, tmp_path: Path) -> None:
    granted, _sibling = _file_and_sibling(tmp_path)
    run = sbx.sandbox_run("cat", str(granted), flags=["--allow-read", str(granted)])
    _assert_ran(run)
    assert run.stdout == OUTSIDE_TEXT


def test_read_grant_on_a_file_does_not_read_its_sibling(sbx: Sandbx, tmp_path: Path) -> None:
    granted, sibling = _file_and_sibling(tmp_path)
    run = sbx.sandbox_run("cat", str(sibling), flags=["--allow-read", str(granted)])
    _assert_refused(run)
    assert run.stdout == ""


def test_read_grant_on_a_file_does_not_list_its_directory(sbx: Sandbx, tmp_path: Path) -> None:
    granted, _sibling = _file_and_sibling(tmp_path)
    run = sbx.sandbox_run("ls", str(granted.parent), flags=["--allow-read", str(granted)])
    _assert_refused(run)
    assert run.stdout == ""


def test_read_grant_on_a_file_does_not_write_it(sbx: Sandbx, tmp_path: Path) -> None:
    granted, _sibling = _file_and_sibling(tmp_path)
    before = _tree(granted.parent)
    run = sbx.sandbox_run(
        "sh", "-c", f"echo changed >> {granted}", flags=["--allow-read", str(granted)]
    )
    _assert_refused(run)
    assert _tree(granted.parent) == before


def test_write_grant_on_a_file_writes_it(sbx: Sandbx, tmp_path: Path) -> None:
    granted, _sibling = _file_and_sibling(tmp_path)
    run = sbx.sandbox_run(
        "sh", "-c", f"echo changed >> {granted}", flags=["--allow-write", str(granted)]
    )
    _assert_ran(run)
    assert granted.read_text() == OUTSIDE_TEXT + "changed\n"


def test_write_grant_on_a_file_does_not_write_its_sibling(sbx: Sandbx, tmp_path: Path) -> None:
    granted, sibling = _file_and_sibling(tmp_path)
    before = _tree(granted.parent)
    run = sbx.sandbox_run(
        "sh", "-c", f"echo changed >> {sibling}", flags=["--allow-write", str(granted)]
    )
    _assert_refused(run)
    assert _tree(granted.parent) == before


def test_write_grant_on_a_file_does_not_delete_it(sbx: Sandbx, tmp_path: Path) -> None:
    granted, _sibling = _file_and_sibling(tmp_path)
    before = _tree(granted.parent)
    run = sbx.sandbox_run("rm", str(granted), flags=["--allow-write", str(granted)])
    _assert_refused(run)
    assert _tree(granted.parent) == before


# --- symlinks, hard links and renames across the edge of a grant -------------


def test_symlink_within_a_write_grant_reads_its_target(sbx: Sandbx) -> None:
    (sbx.workdir / "notes.txt").write_text("in the project\n")
    (sbx.workdir / "link.txt").symlink_to(sbx.workdir / "notes.txt")
    run = sbx.sandbox_run("cat", "link.txt")
    _assert_ran(run)
    assert run.stdout == "in the project\n"


def test_symlink_out_of_a_write_grant_does_not_read_its_target(sbx: Sandbx, tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    (sbx.workdir / "link.txt").symlink_to(outside / "private.txt")
    run = sbx.sandbox_run("cat", "link.txt")
    _assert_refused(run)
    assert run.stdout == ""


def test_symlink_within_a_write_grant_writes_its_target(sbx: Sandbx) -> None:
    (sbx.workdir / "notes.txt").write_text(ORIGINAL)
    (sbx.workdir / "link.txt").symlink_to(sbx.workdir / "notes.txt")
    run = sbx.sandbox_run("sh", "-c", "echo changed >> link.txt")
    _assert_ran(run)
    assert (sbx.workdir / "notes.txt").read_text() == ORIGINAL + "changed\n"


def test_symlink_out_of_a_write_grant_does_not_write_its_target(
    sbx: Sandbx, tmp_path: Path
) -> None:
    outside = _outside(tmp_path)
    (sbx.workdir / "link.txt").symlink_to(outside / "private.txt")
    before = _tree(outside)
    run = sbx.sandbox_run("sh", "-c", "echo changed >> link.txt")
    _assert_refused(run)
    assert _tree(outside) == before


def test_symlink_made_in_the_sandbox_lists_a_directory_inside(sbx: Sandbx) -> None:
    (sbx.workdir / "inner").mkdir()
    (sbx.workdir / "inner" / "a.txt").write_text("")
    run = sbx.sandbox_run("sh", "-c", "ln -s inner escape && ls escape/")
    _assert_ran(run)
    assert run.stdout == "a.txt\n"


def test_symlink_made_in_the_sandbox_does_not_list_a_directory_outside(
    sbx: Sandbx, tmp_path: Path
) -> None:
    outside = _outside(tmp_path)
    run = sbx.sandbox_run("sh", "-c", f"ln -s {outside} escape && ls escape/")
    _assert_refused(run)
    assert (sbx.workdir / "escape").is_symlink()
    assert "private.txt" not in run.stdout


def test_symlink_made_in_the_sandbox_does_not_read_a_directory_outside(
    sbx: Sandbx, tmp_path: Path
) -> None:
    outside = _outside(tmp_path)
    run = sbx.sandbox_run("sh", "-c", f"ln -s {outside} escape && cat escape/private.txt")
    _assert_refused(run)
    assert run.stdout == ""


def test_hard_link_within_a_write_grant_can_be_made(sbx: Sandbx) -> None:
    (sbx.workdir / "notes.txt").write_text(ORIGINAL)
    run = sbx.sandbox_run("ln", "notes.txt", "link.txt")
    _assert_ran(run)
    assert (sbx.workdir / "link.txt").stat().st_ino == (sbx.workdir / "notes.txt").stat().st_ino


def test_hard_link_to_a_file_outside_cannot_be_made_in_a_write_grant(
    sbx: Sandbx, tmp_path: Path
) -> None:
    outside = _outside(tmp_path)
    before = _tree(outside)
    run = sbx.sandbox_run("ln", str(outside / "private.txt"), "link.txt")
    _assert_refused(run)
    assert not (sbx.workdir / "link.txt").exists()
    assert _tree(outside) == before


def _read_and_write_grants(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    read_only = tmp_path / "read-only"
    writable = tmp_path / "writable"
    read_only.mkdir()
    writable.mkdir()
    flags = ["--allow-read", str(read_only), "--allow-write", str(writable)]
    return read_only, writable, flags


def test_a_read_granted_file_cannot_be_hard_linked_into_a_write_grant(
    sbx: Sandbx, tmp_path: Path
) -> None:
    read_only, writable, flags = _read_and_write_grants(tmp_path)
    (read_only / "file.txt").write_text(ORIGINAL)
    before = _tree(read_only)
    run = sbx.sandbox_run(
        "ln", str(read_only / "file.txt"), str(writable / "link.txt"), flags=flags
    )
    _assert_refused(run)
    assert _tree(read_only) == before
    assert list(writable.iterdir()) == []


def test_a_file_moves_between_two_write_grants(sbx: Sandbx, tmp_path: Path) -> None:
    first = tmp_path / "first"
    second = tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "file.txt").write_text(ORIGINAL)
    run = sbx.sandbox_run(
        "mv",
        str(first / "file.txt"),
        str(second / "file.txt"),
        flags=["--allow-write", str(first), "--allow-write", str(second)],
    )
    _assert_ran(run)
    assert not (first / "file.txt").exists()
    assert (second / "file.txt").read_text() == ORIGINAL


def test_a_file_cannot_be_moved_from_a_write_grant_into_a_read_grant(
    sbx: Sandbx, tmp_path: Path
) -> None:
    read_only, writable, flags = _read_and_write_grants(tmp_path)
    (writable / "file.txt").write_text(ORIGINAL)
    before = (_tree(read_only), _tree(writable))
    run = sbx.sandbox_run(
        "mv", str(writable / "file.txt"), str(read_only / "file.txt"), flags=flags
    )
    _assert_refused(run)
    assert (_tree(read_only), _tree(writable)) == before


def test_a_file_cannot_be_moved_out_of_a_read_grant_into_a_write_grant(
    sbx: Sandbx, tmp_path: Path
) -> None:
    read_only, writable, flags = _read_and_write_grants(tmp_path)
    (read_only / "file.txt").write_text(ORIGINAL)
    before = _tree(read_only)
    run = sbx.sandbox_run(
        "mv", str(read_only / "file.txt"), str(writable / "file.txt"), flags=flags
    )
    _assert_refused(run)
    # The grants are separate mounts, so mv falls back to copy and unlink: the
    # copy is within the policy (read there, write here); the unlink is not.
    assert _tree(read_only) == before


def test_a_file_cannot_be_moved_out_of_every_grant(sbx: Sandbx, tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    (sbx.workdir / "notes.txt").write_text(ORIGINAL)
    before = (_tree(outside), _tree(sbx.workdir))
    run = sbx.sandbox_run("mv", "notes.txt", str(outside / "notes.txt"))
    _assert_refused(run)
    assert (_tree(outside), _tree(sbx.workdir)) == before
