"""A grant is pinned to the file it named at derivation; a swap before the run refuses the run.

Also the grants refused at derivation (a missing path, one process's /proc entry) and the
sandbox's own /proc that ``--allow-read /proc`` gives instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbx.boundary import Exited, Failed, FailureReason, RunResult, run_sandboxed
from sandbx.policy import Command, GrantFlags, Policy, derive_policy
from tests.support import Sandbx

pytestmark = pytest.mark.boundary

ORIGINAL = "original\n"


def _derive(tmp_path: Path, granted: Path, *argv: str) -> tuple[Policy, Command]:
    """A policy granting write on ``granted``, derived now, to be run later."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    command = Command(argv=argv)
    policy = derive_policy(
        GrantFlags(write=(str(granted),)),
        command,
        working_directory=str(tmp_path),
        environ={"PATH": "/usr/bin:/bin", "HOME": str(home)},
    )
    return policy, command


def _leave_a_mark(tmp_path: Path, granted: Path) -> tuple[Policy, Command]:
    # The command's stdout is this process's fd 1; a file is the side effect to look for.
    return _derive(tmp_path, granted, "sh", "-c", f"echo ran > {granted}/marker.txt")


def _refused(result: RunResult, reason: FailureReason) -> Failed:
    assert isinstance(result.outcome, Failed), result
    assert result.outcome.reason is reason, result
    assert result.exit_code == 1
    return result.outcome


def test_an_unchanged_grant_runs_the_command(tmp_path: Path) -> None:
    granted = tmp_path / "granted"
    granted.mkdir()
    policy, command = _leave_a_mark(tmp_path, granted)
    result = run_sandboxed(policy, command)
    assert result.outcome == Exited(0)
    assert (granted / "marker.txt").read_text() == "ran\n"


def test_a_grant_replaced_after_derivation_refuses_the_run(tmp_path: Path) -> None:
    granted = tmp_path / "granted"
    granted.mkdir()
    policy, command = _leave_a_mark(tmp_path, granted)
    granted.rename(tmp_path / "moved-away")
    granted.mkdir()
    failed = _refused(run_sandboxed(policy, command), FailureReason.GRANT_REPLACED)
    assert str(granted) in failed.detail
    assert list(granted.iterdir()) == []
    assert list((tmp_path / "moved-away").iterdir()) == []


def test_a_grant_removed_after_derivation_refuses_the_run(tmp_path: Path) -> None:
    granted = tmp_path / "granted"
    granted.mkdir()
    policy, command = _leave_a_mark(tmp_path, granted)
    granted.rename(tmp_path / "moved-away")
    failed = _refused(run_sandboxed(policy, command), FailureReason.GRANT_REPLACED)
    assert str(granted) in failed.detail
    assert not granted.exists()
    assert list((tmp_path / "moved-away").iterdir()) == []


def test_a_grant_redirected_through_a_symlink_refuses_the_run(tmp_path: Path) -> None:
    granted = tmp_path / "granted"
    other = tmp_path / "other"
    granted.mkdir()
    other.mkdir()
    policy, command = _leave_a_mark(tmp_path, granted)
    granted.rename(tmp_path / "moved-away")
    granted.symlink_to(other)
    failed = _refused(run_sandboxed(policy, command), FailureReason.GRANT_REDIRECTED)
    assert str(granted) in failed.detail
    assert list(other.iterdir()) == []
    assert list((tmp_path / "moved-away").iterdir()) == []


def test_a_grant_redirected_to_itself_through_a_symlink_refuses_the_run(tmp_path: Path) -> None:
    granted = tmp_path / "granted"
    granted.mkdir()
    policy, command = _leave_a_mark(tmp_path, granted)
    granted.rename(tmp_path / "moved-away")
    granted.symlink_to(tmp_path / "moved-away")
    _refused(run_sandboxed(policy, command), FailureReason.GRANT_REDIRECTED)
    assert list((tmp_path / "moved-away").iterdir()) == []


def test_a_grant_whose_parent_became_a_symlink_refuses_the_run(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    granted = parent / "granted"
    granted.mkdir(parents=True)
    policy, command = _leave_a_mark(tmp_path, granted)
    parent.rename(tmp_path / "moved-away")
    parent.symlink_to(tmp_path / "moved-away")
    _refused(run_sandboxed(policy, command), FailureReason.GRANT_REDIRECTED)
    assert list((tmp_path / "moved-away" / "granted").iterdir()) == []


def test_an_unchanged_file_grant_runs_the_command(tmp_path: Path) -> None:
    granted = tmp_path / "granted.txt"
    granted.write_text(ORIGINAL)
    policy, command = _derive(tmp_path, granted, "sh", "-c", f"echo ran >> {granted}")
    result = run_sandboxed(policy, command)
    assert result.outcome == Exited(0)
    assert granted.read_text() == ORIGINAL + "ran\n"


def test_a_file_grant_replaced_after_derivation_refuses_the_run(tmp_path: Path) -> None:
    granted = tmp_path / "granted.txt"
    granted.write_text(ORIGINAL)
    policy, command = _derive(tmp_path, granted, "sh", "-c", f"echo ran >> {granted}")
    granted.rename(tmp_path / "moved-away.txt")
    granted.write_text("replacement\n")
    _refused(run_sandboxed(policy, command), FailureReason.GRANT_REPLACED)
    assert granted.read_text() == "replacement\n"
    assert (tmp_path / "moved-away.txt").read_text() == ORIGINAL


# --- grants refused at derivation, through the CLI ---------------------------


@pytest.mark.parametrize("flag", ["--allow-read", "--allow-write", "--allow-exec"])
def test_a_grant_of_a_missing_path_is_refused_before_anything_runs(
    sbx: Sandbx, tmp_path: Path, flag: str
) -> None:
    missing = tmp_path / "missing"
    run = sbx.sandbox_run("true", flags=[flag, str(missing)])
    assert run.returncode == 1
    assert run.records == []
    assert len(run.messages) == 1
    assert f"{flag} {missing} refused" in run.messages[0]


def test_an_existing_grant_runs_the_command(sbx: Sandbx, tmp_path: Path) -> None:
    present = tmp_path / "present"
    present.mkdir()
    run = sbx.sandbox_run("true", flags=["--allow-read", str(present)])
    assert run.returncode == 0, run.stderr
    assert run.record("exited")["code"] == 0


@pytest.mark.parametrize("path", ["/proc/1", "/proc/self", "/proc/self/status"])
def test_a_grant_of_one_process_proc_entry_is_refused(sbx: Sandbx, path: str) -> None:
    run = sbx.sandbox_run("true", flags=["--allow-read", path])
    assert run.returncode == 1
    assert run.records == []
    assert len(run.messages) == 1
    assert f"--allow-read {path} refused" in run.messages[0]
    assert "--allow-read /proc" in run.messages[0].split(" — ", 1)[1]


def test_proc_is_not_readable_without_a_grant(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("cat", "/proc/self/status")
    assert run.record("exited")["code"] != 0
    assert "Permission denied" in run.stderr
    assert run.stdout == ""


def test_a_read_grant_of_proc_shows_the_command_its_own_status(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("cat", "/proc/self/status", flags=["--allow-read", "/proc"])
    assert run.returncode == 0, run.stderr
    assert "Name:\tcat\n" in run.stdout
    # The command is PID 1 of its own pid namespace, and its /proc says so.
    assert "\nPid:\t1\n" in run.stdout


def test_a_read_grant_of_proc_lists_only_the_sandbox_processes(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("ls", "/proc", flags=["--allow-read", "/proc"])
    assert run.returncode == 0, run.stderr
    pids = {int(name) for name in run.stdout.split() if name.isdigit()}
    assert 1 in pids
    assert max(pids) < 10
    assert os.getpid() not in pids
