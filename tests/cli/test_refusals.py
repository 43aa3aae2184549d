"""Refusals through the CLI: working directories sandbx will not derive a policy from,
and grants that would reach sandbx's own session store or credential file.

Every refusal is one line naming what was refused and the way out; nothing is spawned.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

import pytest

from tests.support import SANDBX, Run, Sandbx, parse_records
from tests.support import sandbx as run_sandbx

DERIVED_ROOT_HINT = (
    " — pass --allow-read PATH and --allow-write PATH for the tree the command needs"
)
OWNED_HINT = "grant a narrower path"
AXES = ("--allow-read", "--allow-write", "--allow-exec")


def assert_refused(run: Run, *fragments: str) -> str:
    """One ``sandbx:`` line on stderr, exit 1, no record, nothing on stdout; returns the line."""
    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    assert run.records == []
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert run.stderr.endswith("\n")
    line = lines[0]
    assert line.startswith("sandbx: ")
    for fragment in fragments:
        assert fragment in line
    return line


def assert_derived_root_refused(run: Run, root: str) -> None:
    line = assert_refused(run)
    assert line.startswith("sandbx: refusing to derive a policy from ")
    assert line.endswith(f" {root}{DERIVED_ROOT_HINT}")


def without_home(env: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name != "HOME"}


def person_homes() -> list[str]:
    """Home directories of people on this host that this test process may enter."""
    homes = {"/root"} | {
        entry.pw_dir for entry in pwd.getpwall() if entry.pw_uid >= 1000 and entry.pw_dir != "/"
    }
    return sorted(
        os.path.realpath(home)
        for home in homes
        if home and os.path.isdir(home) and os.access(home, os.X_OK)
    )


def existing(*paths: str) -> list[str]:
    return [path for path in paths if os.path.isdir(path)]


# --- the working directory ----------------------------------------------------


def test_the_filesystem_root_is_refused_as_a_working_directory(sbx: Sandbx) -> None:
    marker = sbx.workdir / "ran"
    run = sbx.sandbox_run("/usr/bin/touch", str(marker), cwd=Path("/"))
    assert_refused(
        run,
        "sandbx: refusing to derive a policy from the filesystem root /" + DERIVED_ROOT_HINT,
    )
    assert not marker.exists()


def test_the_home_directory_is_refused_with_the_spec_message(sbx: Sandbx) -> None:
    marker = sbx.home / "ran"
    run = sbx.sandbox_run("/usr/bin/touch", str(marker), cwd=sbx.home)
    line = assert_refused(run)
    assert line == (
        f"sandbx: refusing to derive a policy from your home directory {sbx.home}"
        + DERIVED_ROOT_HINT
    )
    assert not marker.exists()


def test_home_reached_through_a_symlink_is_still_refused(sbx: Sandbx, tmp_path: Path) -> None:
    link = tmp_path / "home-link"
    link.symlink_to(sbx.home)
    run = sbx.sandbox_run("/bin/true", cwd=sbx.home, HOME=str(link))
    assert_derived_root_refused(run, str(sbx.home))


def test_a_directory_containing_home_is_refused(sbx: Sandbx, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    run = sbx.sandbox_run("/usr/bin/touch", str(marker), cwd=tmp_path)
    assert_derived_root_refused(run, str(tmp_path))
    assert not marker.exists()


def test_the_simulated_home_base_is_refused(sbx: Sandbx, tmp_path: Path) -> None:
    base = tmp_path / "x" / "home"
    alice = base / "alice"
    alice.mkdir(parents=True)
    run = sbx.sandbox_run("/bin/true", cwd=base, HOME=str(alice))
    assert_derived_root_refused(run, str(base))


@pytest.mark.skipif(not os.path.isdir("/home"), reason="this host has no /home")
def test_the_directory_where_homes_live_is_refused(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/bin/true", cwd=Path("/home"))
    assert_derived_root_refused(run, os.path.realpath("/home"))


@pytest.mark.parametrize(
    "directory", existing("/usr", "/usr/lib", "/usr/bin", "/usr/local", "/bin", "/lib")
)
def test_a_directory_overlapping_the_system_binaries_is_refused(
    sbx: Sandbx, directory: str
) -> None:
    run = sbx.sandbox_run("/bin/true", cwd=Path(directory))
    assert_derived_root_refused(run, os.path.realpath(directory))


@pytest.mark.skipif(not person_homes(), reason="no person's home on this host can be entered")
def test_another_persons_home_is_refused_while_home_points_elsewhere(sbx: Sandbx) -> None:
    home = person_homes()[0]
    run = sbx.sandbox_run("/bin/true", cwd=Path(home))
    assert_derived_root_refused(run, home)


@pytest.mark.skipif(not person_homes(), reason="no person's home on this host can be entered")
@pytest.mark.parametrize("home_value", [None, "", "relative/alice", "/nonexistent/alice", "/"])
def test_a_persons_home_is_refused_when_home_is_unset_or_unusable(
    sbx: Sandbx, home_value: str | None
) -> None:
    env = without_home(sbx.env)
    if home_value is not None:
        env["HOME"] = home_value
    home = person_homes()[0]
    run = run_sandbx("sandbox-run", "--", "/bin/true", cwd=Path(home), env=env)
    assert_derived_root_refused(run, home)


def test_the_filesystem_root_is_refused_when_home_is_unset(sbx: Sandbx) -> None:
    run = run_sandbx("sandbox-run", "--", "/bin/true", cwd=Path("/"), env=without_home(sbx.env))
    assert_derived_root_refused(run, "/")


@pytest.mark.boundary
def test_an_ordinary_project_directory_runs(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/usr/bin/touch", "made")
    assert run.returncode == 0, run.stderr
    assert (sbx.workdir / "made").exists()
    assert [record["decision"] for record in run.records] == ["spawned", "exited"]


@pytest.mark.boundary
def test_a_project_directory_inside_home_runs(sbx: Sandbx) -> None:
    project = sbx.home / "src" / "project"
    project.mkdir(parents=True)
    run = sbx.sandbox_run("/usr/bin/touch", "made", cwd=project)
    assert run.returncode == 0, run.stderr
    assert (project / "made").exists()


@pytest.mark.boundary
def test_a_sibling_of_home_runs_when_home_is_usable(sbx: Sandbx, tmp_path: Path) -> None:
    base = tmp_path / "x" / "home"
    (base / "alice").mkdir(parents=True)
    (base / "bob").mkdir()
    run = sbx.sandbox_run("/bin/true", cwd=base / "bob", HOME=str(base / "alice"))
    assert run.returncode == 0, run.stderr


@pytest.mark.boundary
@pytest.mark.parametrize("where", ["root", "home"])
def test_a_path_flag_lets_a_refused_working_directory_run(
    sbx: Sandbx, tmp_path: Path, where: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text("granted\n")
    cwd = Path("/") if where == "root" else sbx.home
    run = sbx.sandbox_run(
        "/bin/cat", str(data / "notes.txt"), flags=["--allow-read", str(data)], cwd=cwd
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "granted\n"
    assert run.record("spawned")["readable"] == 1
    assert run.record("exited")["code"] == 0


# --- sandbx's own state -------------------------------------------------------


@pytest.fixture
def xdg(sbx: Sandbx, tmp_path: Path) -> dict[str, Path]:
    """An absolute XDG state and config home, with a session store and a credential file."""
    state = tmp_path / "state"
    config = tmp_path / "config"
    store = state / "sandbx" / "sessions"
    (store / "s1").mkdir(parents=True)
    (config / "sandbx").mkdir(parents=True)
    credentials = config / "sandbx" / "credentials.toml"
    credentials.write_text("api_key = 'sk-test'\n")
    sbx.env["XDG_STATE_HOME"] = str(state)
    sbx.env["XDG_CONFIG_HOME"] = str(config)
    return {"state": state, "config": config, "store": store, "credentials": credentials}


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize(
    "target",
    [
        "state",
        "state/sandbx",
        "state/sandbx/sessions",
        "state/sandbx/sessions/s1",
    ],
)
def test_a_grant_above_inside_or_at_the_session_store_is_refused(
    sbx: Sandbx, xdg: dict[str, Path], tmp_path: Path, axis: str, target: str
) -> None:
    path = str(tmp_path / target)
    run = sbx.sandbox_run("/bin/true", flags=[axis, path])
    assert_refused(
        run,
        f"sandbx: {axis} {path} refused:",
        f"session store {xdg['store']}",
        OWNED_HINT,
    )


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("target", ["config", "config/sandbx", "config/sandbx/credentials.toml"])
def test_a_grant_above_or_at_the_credential_file_is_refused(
    sbx: Sandbx, xdg: dict[str, Path], tmp_path: Path, axis: str, target: str
) -> None:
    path = str(tmp_path / target)
    run = sbx.sandbox_run("/bin/true", flags=[axis, path])
    assert_refused(
        run,
        f"sandbx: {axis} {path} refused:",
        f"credential file {xdg['credentials']}",
        OWNED_HINT,
    )


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("target", ["home", "/"])
def test_home_and_the_root_are_refused_as_grants_on_every_axis(
    sbx: Sandbx, axis: str, target: str
) -> None:
    path = str(sbx.home) if target == "home" else "/"
    run = sbx.sandbox_run("/bin/true", flags=[axis, path])
    store = sbx.home / ".local" / "state" / "sandbx" / "sessions"
    assert_refused(run, f"sandbx: {axis} {path} refused:", f"session store {store}", OWNED_HINT)


def test_the_config_directory_under_home_is_refused_for_the_credential_file(sbx: Sandbx) -> None:
    config = sbx.home / ".config"
    config.mkdir()
    run = sbx.sandbox_run("/bin/true", flags=["--allow-read", str(config)])
    credentials = config / "sandbx" / "credentials.toml"
    assert_refused(run, f"credential file {credentials}", OWNED_HINT)


@pytest.mark.parametrize(
    ("under_home", "owned"),
    [
        (".local/state", "session store {home}/.local/state/sandbx/sessions"),
        (".config", "credential file {home}/.config/sandbx/credentials.toml"),
    ],
)
def test_a_relative_xdg_value_is_ignored_and_home_stays_protected(
    sbx: Sandbx, under_home: str, owned: str
) -> None:
    protected = sbx.home / under_home
    protected.mkdir(parents=True)
    (sbx.workdir / "state").mkdir()
    (sbx.workdir / "config").mkdir()
    run = sbx.sandbox_run(
        "/bin/true",
        flags=["--allow-read", str(protected)],
        XDG_STATE_HOME="state",
        XDG_CONFIG_HOME="config",
    )
    assert_refused(run, owned.format(home=sbx.home), OWNED_HINT)


@pytest.mark.parametrize("points_at", ["store", "credentials", "state"])
def test_a_symlink_pointing_at_sandbx_state_is_refused(
    sbx: Sandbx, xdg: dict[str, Path], tmp_path: Path, points_at: str
) -> None:
    link = tmp_path / f"innocent-{points_at}"
    link.symlink_to(xdg[points_at])
    run = sbx.sandbox_run("/bin/true", flags=["--allow-read", str(link)])
    assert_refused(run, f"--allow-read {link} refused: it reaches sandbx's own", OWNED_HINT)


def test_a_hard_link_to_the_credential_file_is_refused(
    sbx: Sandbx, xdg: dict[str, Path], tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    hard = elsewhere / "notes.toml"
    os.link(xdg["credentials"], hard)
    run = sbx.sandbox_run("/bin/true", flags=["--allow-read", str(hard)])
    assert_refused(run, f"credential file {xdg['credentials']}", OWNED_HINT)


def test_a_state_home_reached_through_a_symlink_protects_its_target(
    sbx: Sandbx, tmp_path: Path
) -> None:
    real = tmp_path / "real-state"
    real.mkdir()
    link = tmp_path / "state-link"
    link.symlink_to(real)
    run = sbx.sandbox_run("/bin/true", flags=["--allow-read", str(real)], XDG_STATE_HOME=str(link))
    assert_refused(run, f"session store {real}/sandbx/sessions", OWNED_HINT)


def test_a_relative_grant_is_resolved_before_it_is_vetted(
    sbx: Sandbx, xdg: dict[str, Path]
) -> None:
    run = sbx.sandbox_run("/bin/true", flags=["--allow-read", "sandbx"], cwd=xdg["state"])
    assert_refused(run, "--allow-read sandbx refused:", f"session store {xdg['store']}")


def test_a_working_directory_holding_the_session_store_is_refused(sbx: Sandbx) -> None:
    state = sbx.workdir / ".state"
    run = sbx.sandbox_run("/bin/true", XDG_STATE_HOME=str(state))
    assert_refused(
        run,
        f"the working directory {sbx.workdir} refused:",
        f"session store {state}/sandbx/sessions",
        OWNED_HINT,
    )


@pytest.mark.boundary
def test_a_sibling_of_the_session_store_is_granted(
    sbx: Sandbx, xdg: dict[str, Path], tmp_path: Path
) -> None:
    sibling = tmp_path / "state" / "sandbx" / "sessions-old"
    sibling.mkdir()
    (sibling / "notes.txt").write_text("kept\n")
    run = sbx.sandbox_run(
        "/bin/cat", str(sibling / "notes.txt"), flags=["--allow-read", str(sibling)]
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "kept\n"


@pytest.mark.boundary
def test_a_project_under_home_is_granted_beside_the_protected_state(sbx: Sandbx) -> None:
    project = sbx.home / "project"
    project.mkdir()
    run = sbx.sandbox_run(
        "/usr/bin/touch", str(project / "made"), flags=["--allow-write", str(project)]
    )
    assert run.returncode == 0, run.stderr
    assert (project / "made").exists()


def test_a_grant_of_a_missing_path_is_refused_naming_it(sbx: Sandbx) -> None:
    missing = sbx.workdir / "missing"
    run = sbx.sandbox_run("/bin/true", flags=["--allow-read", str(missing)])
    assert_refused(run, f"--allow-read {missing} refused: no such file or directory")


def test_a_refusal_never_creates_the_session_store(sbx: Sandbx) -> None:
    sbx.sandbox_run("/bin/true", flags=["--allow-read", "/"])
    assert not (sbx.home / ".local").exists()


def test_a_grant_path_with_a_newline_is_refused_on_one_line(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/bin/true", flags=["--allow-read", "no\nsuch"])
    assert_refused(run, "--allow-read", "no such file or directory")


def test_a_working_directory_that_no_longer_exists_is_refused_as_sandbx_not_a_crash(
    sbx: Sandbx,
) -> None:
    gone = sbx.workdir / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && shift && exec "$@"'
    completed = subprocess.run(
        ["/bin/sh", "-c", script, "sh", str(gone), *SANDBX, "sandbox-run", "--", "/bin/true"],
        env=sbx.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    run = Run(
        completed.returncode, completed.stdout, completed.stderr, parse_records(completed.stderr)
    )
    line = assert_refused(run)
    assert "internal error" not in line
