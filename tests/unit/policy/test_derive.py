"""derive_policy and its vetting, without a kernel: default grants, path flags, refusals,
the derived-root guard, sandbx's own state, the environment helpers and the pin digest.
"""

from __future__ import annotations

import hashlib
import math
import os
import pwd
import shutil
from pathlib import Path

import pytest

from sandbx.errors import (
    DerivedRootRefused,
    EnvironmentNameRefused,
    GrantPathUnusable,
    GrantReachesOwnedPath,
    PinRefused,
    PolicyRefusal,
    UsageError,
)
from sandbx.policy import (
    DEFAULT_ENV_NAMES,
    SYSTEM_FLOOR,
    Access,
    Command,
    GrantFlags,
    GrantOrigin,
    Policy,
    VettedGrant,
    credential_file,
    derive_policy,
    owned_paths,
    parse_digest,
    session_store_dir,
    sha256_of_fd,
    starts_with_shebang,
    vet_derived_root,
    vet_env_name,
    vet_timeout,
)
from sandbx.policy._environment import crossing_environment, granted_names

TRUE = Command(argv=("/bin/true",))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", "SECRET_TOKEN": "hunter2"}


def derive(
    project: Path, environ: dict[str, str], command: Command = TRUE, **flags: object
) -> Policy:
    return derive_policy(
        GrantFlags(**flags),  # type: ignore[arg-type]
        command,
        working_directory=str(project),
        environ=environ,
    )


def floor_grants() -> list[tuple[str, Access, GrantOrigin]]:
    seen: list[tuple[str, Access, GrantOrigin]] = []
    for path in SYSTEM_FLOOR:
        if os.path.exists(path):
            grant = (os.path.realpath(path), Access.EXECUTE, GrantOrigin.SYSTEM_FLOOR)
            if grant not in seen:
                seen.append(grant)
    return seen


def shape(policy: Policy) -> list[tuple[str, Access, GrantOrigin]]:
    return [(grant.path, grant.access, grant.origin) for grant in policy.grants]


# --- grants -------------------------------------------------------------------


def test_the_system_floor_is_the_four_spec_directories() -> None:
    assert SYSTEM_FLOOR == ("/usr", "/bin", "/lib", "/lib64")


def test_without_path_flags_the_floor_and_the_working_directory_are_granted(
    project: Path, environ: dict[str, str]
) -> None:
    policy = derive(project, environ)
    assert shape(policy) == [
        *floor_grants(),
        (str(project), Access.WRITE, GrantOrigin.WORKING_DIRECTORY),
    ]


@pytest.mark.parametrize(
    ("flag", "access"),
    [("read", Access.READ), ("write", Access.WRITE), ("execute", Access.EXECUTE)],
)
def test_any_path_flag_replaces_the_working_directory_default(
    project: Path, environ: dict[str, str], tmp_path: Path, flag: str, access: Access
) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    policy = derive(project, environ, **{flag: (str(srv),)})
    assert shape(policy) == [*floor_grants(), (str(srv), access, GrantOrigin.FLAG)]


def test_a_relative_flag_path_is_resolved_against_the_working_directory(
    project: Path, environ: dict[str, str]
) -> None:
    (project / "src").mkdir()
    policy = derive(project, environ, read=("src",))
    assert policy.grants[-1].path == str(project / "src")


def test_a_symlinked_flag_path_is_granted_as_its_target(
    project: Path, environ: dict[str, str], tmp_path: Path
) -> None:
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    policy = derive(project, environ, read=(str(link),))
    assert policy.grants[-1].path == str(target)


def test_a_grant_is_pinned_to_its_device_and_inode(project: Path, environ: dict[str, str]) -> None:
    status = project.stat()
    grant = derive(project, environ).grants[-1]
    assert (grant.device, grant.inode, grant.is_directory) == (status.st_dev, status.st_ino, True)


def test_a_file_grant_is_marked_as_not_a_directory(project: Path, environ: dict[str, str]) -> None:
    (project / "notes.txt").write_text("x")
    grant = derive(project, environ, read=(str(project / "notes.txt"),)).grants[-1]
    assert grant.is_directory is False


def test_a_path_named_twice_on_one_axis_is_granted_once(
    project: Path, environ: dict[str, str], tmp_path: Path
) -> None:
    link = tmp_path / "link"
    link.symlink_to(project)
    policy = derive(project, environ, read=(str(project), str(project), str(link), "."))
    assert policy.count(Access.READ) == 1


def test_the_same_path_on_two_axes_is_kept_on_both(project: Path, environ: dict[str, str]) -> None:
    policy = derive(project, environ, read=(str(project),), write=(str(project),))
    assert policy.count(Access.READ) == 1
    assert policy.count(Access.WRITE) == 1


def test_a_flag_repeating_a_floor_directory_is_not_counted_twice(
    project: Path, environ: dict[str, str]
) -> None:
    policy = derive(project, environ, execute=("/usr",))
    assert policy.count(Access.EXECUTE) == len(floor_grants())


def test_access_counts_follow_the_grants_per_axis(
    project: Path, environ: dict[str, str], tmp_path: Path
) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    policy = derive(
        project,
        environ,
        read=(str(tmp_path / "a"), str(tmp_path / "b")),
        write=(str(tmp_path / "c"),),
    )
    assert policy.count(Access.READ) == 2
    assert policy.count(Access.WRITE) == 1
    assert policy.count(Access.EXECUTE) == len(floor_grants())


def test_the_proc_root_may_be_granted_and_is_marked_as_procfs(
    project: Path, environ: dict[str, str]
) -> None:
    grant = derive(project, environ, read=("/proc",)).grants[-1]
    assert (grant.path, grant.on_procfs) == ("/proc", True)


@pytest.mark.parametrize("path", [f"/proc/{os.getpid()}", "/proc/self"])
def test_one_processs_proc_entry_is_refused(
    project: Path, environ: dict[str, str], path: str
) -> None:
    with pytest.raises(GrantPathUnusable, match="/proc") as caught:
        derive(project, environ, read=(path,))
    assert "--allow-read /proc" in caught.value.hint


def test_a_missing_path_is_refused_as_unusable(project: Path, environ: dict[str, str]) -> None:
    with pytest.raises(GrantPathUnusable) as caught:
        derive(project, environ, write=("missing",))
    assert caught.value.what == "--allow-write missing refused: no such file or directory"


@pytest.mark.parametrize("path", ["", "a\0b"], ids=["empty", "nul"])
def test_an_empty_or_nul_path_is_a_usage_error(
    project: Path, environ: dict[str, str], path: str
) -> None:
    with pytest.raises(UsageError, match="--allow-read needs a path"):
        derive(project, environ, read=(path,))


def test_a_vetted_grant_cannot_be_built_outside_the_policy_package(project: Path) -> None:
    with pytest.raises(TypeError, match=r"only by sandbx\.policy"):
        VettedGrant(
            path=str(project),
            access=Access.WRITE,
            origin=GrantOrigin.FLAG,
            device=0,
            inode=0,
            is_directory=True,
            on_procfs=False,
            vetted_by=object(),
        )


def test_a_vetted_grant_cannot_be_changed_to_a_wider_path(
    project: Path, environ: dict[str, str]
) -> None:
    grant = derive(project, environ).grants[-1]
    with pytest.raises(AttributeError):
        grant.path = "/"  # type: ignore[misc]
    assert grant.path == str(project)


def test_a_policy_cannot_be_widened_after_derivation(
    project: Path, environ: dict[str, str]
) -> None:
    policy = derive(project, environ)
    with pytest.raises(AttributeError):
        policy.grants = ()  # type: ignore[misc]
    assert policy.grants


# --- sandbx's own state -------------------------------------------------------


def test_owned_paths_follow_absolute_xdg_directories(tmp_path: Path) -> None:
    environ = {"XDG_STATE_HOME": str(tmp_path / "s"), "XDG_CONFIG_HOME": str(tmp_path / "c")}
    assert session_store_dir(environ) == str(tmp_path / "s" / "sandbx" / "sessions")
    assert credential_file(environ) == str(tmp_path / "c" / "sandbx" / "credentials.toml")


def test_relative_xdg_directories_are_ignored_for_home(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "XDG_STATE_HOME": "s", "XDG_CONFIG_HOME": "c"}
    assert session_store_dir(environ) == f"{tmp_path}/.local/state/sandbx/sessions"
    assert credential_file(environ) == f"{tmp_path}/.config/sandbx/credentials.toml"


@pytest.mark.parametrize("home", [None, "", "relative"], ids=["unset", "empty", "relative"])
def test_without_a_usable_home_owned_paths_come_from_the_password_database(
    home: str | None,
) -> None:
    environ = {} if home is None else {"HOME": home}
    database_home = pwd.getpwuid(os.getuid()).pw_dir
    assert session_store_dir(environ) == f"{database_home}/.local/state/sandbx/sessions"


def test_owned_paths_are_canonical(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    owned = owned_paths({"XDG_STATE_HOME": str(tmp_path / "link"), "HOME": str(tmp_path)})
    assert owned[0].kind == "session store"
    assert owned[0].path == f"{real}/sandbx/sessions"


@pytest.mark.parametrize("axis", ["read", "write", "execute"])
@pytest.mark.parametrize("target", ["home", "/", "store", "above-store"])
def test_a_grant_reaching_the_session_store_is_refused_on_every_axis(
    project: Path, environ: dict[str, str], axis: str, target: str
) -> None:
    store = Path(environ["HOME"]) / ".local" / "state" / "sandbx" / "sessions"
    store.mkdir(parents=True)
    path = {
        "home": environ["HOME"],
        "/": "/",
        "store": str(store),
        "above-store": str(store.parent),
    }[target]
    with pytest.raises(GrantReachesOwnedPath) as caught:
        derive(project, environ, **{axis: (path,)})
    assert f"session store {store}" in caught.value.what


def test_a_grant_at_the_credential_file_is_refused(project: Path, environ: dict[str, str]) -> None:
    credentials = Path(environ["HOME"]) / ".config" / "sandbx" / "credentials.toml"
    credentials.parent.mkdir(parents=True)
    credentials.write_text("")
    with pytest.raises(GrantReachesOwnedPath, match="credential file"):
        derive(project, environ, read=(str(credentials),))


def test_a_hard_link_to_the_credential_file_is_refused(
    project: Path, environ: dict[str, str]
) -> None:
    credentials = Path(environ["HOME"]) / ".config" / "sandbx" / "credentials.toml"
    credentials.parent.mkdir(parents=True)
    credentials.write_text("")
    os.link(credentials, project / "innocent")
    with pytest.raises(GrantReachesOwnedPath, match="credential file"):
        derive(project, environ, read=(str(project / "innocent"),))


def test_a_sibling_of_the_store_sharing_its_name_prefix_is_granted(
    project: Path, environ: dict[str, str]
) -> None:
    sibling = Path(environ["HOME"]) / ".local" / "state" / "sandbx" / "sessions-old"
    sibling.mkdir(parents=True)
    policy = derive(project, environ, read=(str(sibling),))
    assert policy.grants[-1].path == str(sibling)


def test_the_derived_working_directory_is_refused_when_it_holds_the_store(
    project: Path, environ: dict[str, str]
) -> None:
    environ["XDG_STATE_HOME"] = str(project / ".state")
    with pytest.raises(GrantReachesOwnedPath, match="the working directory"):
        derive(project, environ)


def test_every_refusal_is_a_policy_refusal_and_usage_errors_are_not() -> None:
    for refusal in (DerivedRootRefused, GrantPathUnusable, GrantReachesOwnedPath, PinRefused):
        assert issubclass(refusal, PolicyRefusal)
        assert refusal.exit_code == 1
    assert issubclass(EnvironmentNameRefused, UsageError)
    assert UsageError.exit_code == 64


def test_a_refusal_renders_as_one_line_with_its_way_out() -> None:
    error = GrantReachesOwnedPath("--allow-read", "/", "/h/.local/state/x", "session store")
    assert error.one_line() == (
        "sandbx: --allow-read / refused: it reaches sandbx's own session store "
        "/h/.local/state/x — grant a narrower path; no flag lets a command reach "
        "sandbx's session store or credential file"
    )


# --- the derived-root guard ---------------------------------------------------


def refusal_of(root: str, environ: dict[str, str]) -> str:
    with pytest.raises(DerivedRootRefused) as caught:
        vet_derived_root(root, environ)
    assert caught.value.hint == (
        "pass --allow-read PATH and --allow-write PATH for the tree the command needs"
    )
    return caught.value.what


def test_the_filesystem_root_is_refused() -> None:
    assert refusal_of("/", {}) == "refusing to derive a policy from the filesystem root /"


def test_home_is_refused_with_the_spec_wording(environ: dict[str, str]) -> None:
    assert refusal_of(environ["HOME"], environ) == (
        f"refusing to derive a policy from your home directory {environ['HOME']}"
    )


def test_a_directory_containing_home_is_refused(environ: dict[str, str], tmp_path: Path) -> None:
    assert "contains your home directory" in refusal_of(str(tmp_path), environ)


def test_a_directory_below_home_is_accepted(environ: dict[str, str]) -> None:
    project = Path(environ["HOME"]) / "project"
    project.mkdir()
    assert vet_derived_root(str(project), environ) == str(project)


def test_the_accepted_root_is_canonical(environ: dict[str, str], tmp_path: Path) -> None:
    project = Path(environ["HOME"]) / "project"
    project.mkdir()
    (tmp_path / "link").symlink_to(project)
    assert vet_derived_root(str(tmp_path / "link"), environ) == str(project)


@pytest.mark.skipif(not os.path.isdir("/home"), reason="this host has no /home")
def test_the_directory_where_homes_live_is_refused(environ: dict[str, str]) -> None:
    assert "where home directories live" in refusal_of("/home", environ)


@pytest.mark.parametrize(
    "root",
    [path for path in ("/usr", "/usr/lib", "/usr/local/share", "/bin") if os.path.exists(path)],
)
def test_a_directory_overlapping_the_system_binaries_is_refused(
    environ: dict[str, str], root: str
) -> None:
    assert "system binaries" in refusal_of(root, environ)


def test_root_s_home_is_refused_as_a_home_directory(environ: dict[str, str]) -> None:
    if not os.path.exists("/root"):
        pytest.skip("this host has no /root")
    assert refusal_of("/root", environ) == "refusing to derive a policy from a home directory /root"


@pytest.mark.skipif(not os.path.isdir("/home"), reason="this host has no /home")
@pytest.mark.parametrize("home", [None, "", "relative/alice", "/nonexistent/alice", "/"], ids=repr)
def test_a_home_shaped_directory_is_refused_when_home_is_unset_or_unusable(
    home: str | None,
) -> None:
    environ = {} if home is None else {"HOME": home}
    root = "/home/no-such-person-sandbx-test"
    assert "home-shaped" in refusal_of(root, environ)


@pytest.mark.skipif(not os.path.isdir("/home"), reason="this host has no /home")
def test_a_home_shaped_directory_is_accepted_when_home_is_usable(
    environ: dict[str, str],
) -> None:
    root = "/home/no-such-person-sandbx-test"
    assert vet_derived_root(root, environ) == root


def test_a_sibling_of_a_usable_home_is_accepted(environ: dict[str, str], tmp_path: Path) -> None:
    assert vet_derived_root(str(tmp_path / "project"), environ) == str(tmp_path / "project")


def test_the_parent_of_home_is_refused_as_a_place_homes_live(tmp_path: Path) -> None:
    home = tmp_path / "x" / "home" / "alice"
    home.mkdir(parents=True)
    assert "home" in refusal_of(str(tmp_path / "x" / "home"), {"HOME": str(home)})


# --- the environment ----------------------------------------------------------


def test_the_default_names_are_the_spec_seven() -> None:
    assert DEFAULT_ENV_NAMES == ("PATH", "HOME", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


@pytest.mark.parametrize("name", ["", "A=B", "A\0B", "=B"], ids=["empty", "value", "nul", "eq"])
def test_a_bad_environment_name_is_refused_as_a_usage_error(name: str) -> None:
    with pytest.raises(EnvironmentNameRefused):
        vet_env_name(name)


def test_a_plain_environment_name_is_kept() -> None:
    assert vet_env_name("CARGO_HOME") == "CARGO_HOME"


def test_granted_names_are_the_defaults_then_each_extra_once() -> None:
    assert granted_names(["EXTRA", "PATH", "EXTRA", "OTHER"]) == (
        *DEFAULT_ENV_NAMES,
        "EXTRA",
        "OTHER",
    )


def test_granted_names_vet_each_extra() -> None:
    with pytest.raises(EnvironmentNameRefused):
        granted_names(["GOOD", "BAD=1"])


def test_only_granted_names_present_in_the_environment_cross_with_their_values() -> None:
    environ = {"PATH": "/bin", "TZ": "UTC", "SECRET": "s", "EXTRA": "a\nb"}
    names = (*DEFAULT_ENV_NAMES, "EXTRA", "ABSENT")
    assert crossing_environment(names, environ) == (
        ("PATH", "/bin"),
        ("TZ", "UTC"),
        ("EXTRA", "a\nb"),
    )


def test_the_policy_carries_the_crossing_values_and_the_granted_names(
    project: Path, environ: dict[str, str]
) -> None:
    policy = derive(project, environ, env=("ABSENT",))
    assert dict(policy.environment) == {"HOME": environ["HOME"], "PATH": environ["PATH"]}
    assert policy.granted_env_names == (*DEFAULT_ENV_NAMES, "ABSENT")


# --- the timeout --------------------------------------------------------------


@pytest.mark.parametrize("seconds", [0.0, -1.0, math.nan, math.inf, -math.inf])
def test_a_timeout_that_is_not_positive_and_finite_is_a_usage_error(seconds: float) -> None:
    with pytest.raises(UsageError, match="--timeout"):
        vet_timeout(seconds)


@pytest.mark.parametrize("seconds", [None, 0.001, 1.5, 86400.0])
def test_a_positive_timeout_or_none_is_kept(seconds: float | None) -> None:
    assert vet_timeout(seconds) == seconds


# --- the pin ------------------------------------------------------------------


def test_parse_digest_keeps_a_lowercase_digest() -> None:
    digest = "ab" * 32
    assert parse_digest(digest) == digest


def test_parse_digest_lowercases_and_strips() -> None:
    assert parse_digest(" " + "AB" * 32 + "\n") == "ab" * 32


@pytest.mark.parametrize(
    "text",
    ["", "nothex", "a" * 63, "a" * 65, "g" * 64, "0x" + "a" * 62, "a" * 32 + " " + "a" * 31],
    ids=["empty", "word", "short", "long", "non-hex", "0x", "inner-space"],
)
def test_parse_digest_refuses_anything_but_64_hex_digits(text: str) -> None:
    with pytest.raises(UsageError, match="SHA-256"):
        parse_digest(text)


def test_sha256_of_fd_matches_hashlib_past_one_chunk(tmp_path: Path) -> None:
    content = os.urandom((1 << 20) + 17)
    path = tmp_path / "blob"
    path.write_bytes(content)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert sha256_of_fd(fd) == hashlib.sha256(content).hexdigest()
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("content", "expected"), [(b"#!/bin/sh\n", True), (b"\x7fELF", False), (b"#", False)]
)
def test_starts_with_shebang_reads_the_first_two_bytes(
    tmp_path: Path, content: bytes, expected: bool
) -> None:
    path = tmp_path / "program"
    path.write_bytes(content)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert starts_with_shebang(fd) is expected
    finally:
        os.close(fd)


def test_a_pin_is_derived_for_an_absolute_readable_program(
    project: Path, environ: dict[str, str]
) -> None:
    command = Command(argv=("/usr/bin/true",))
    policy = derive(project, environ, command, pin_sha256="AB" * 32)
    assert policy.pin is not None
    assert (policy.pin.program, policy.pin.sha256) == ("/usr/bin/true", "ab" * 32)


def test_no_pin_is_derived_without_the_flag(project: Path, environ: dict[str, str]) -> None:
    assert derive(project, environ).pin is None


def test_a_pin_on_a_relative_program_is_a_usage_error(
    project: Path, environ: dict[str, str]
) -> None:
    with pytest.raises(UsageError, match="absolute"):
        derive(project, environ, Command(argv=("true",)), pin_sha256="a" * 64)


def test_a_pin_on_a_shebang_script_is_refused(project: Path, environ: dict[str, str]) -> None:
    script = project / "script"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(PinRefused) as caught:
        derive(project, environ, Command(argv=(str(script),)), pin_sha256="a" * 64)
    assert "pin the interpreter" in caught.value.hint


def test_a_pin_on_a_missing_program_is_refused(project: Path, environ: dict[str, str]) -> None:
    with pytest.raises(PinRefused):
        derive(project, environ, Command(argv=(str(project / "nope"),)), pin_sha256="a" * 64)


def test_a_pin_on_an_unreadable_program_is_refused(project: Path, environ: dict[str, str]) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file, so an exec-only program is readable to it")
    program = project / "exec-only"
    shutil.copy2("/usr/bin/true", program)
    program.chmod(0o111)
    with pytest.raises(PinRefused, match="read"):
        derive(project, environ, Command(argv=(str(program),)), pin_sha256="a" * 64)
