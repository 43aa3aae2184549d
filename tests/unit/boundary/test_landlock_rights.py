"""Which Landlock rights each ABI handles and each grant axis allows, without a kernel."""

import pytest

from sandbx.boundary import _landlock as landlock
from sandbx.policy import Access


@pytest.mark.parametrize(
    ("abi", "has_refer", "has_truncate", "has_net", "has_ioctl", "has_scopes"),
    [
        (1, False, False, False, False, False),
        (2, True, False, False, False, False),
        (3, True, True, False, False, False),
        (4, True, True, True, False, False),
        (5, True, True, True, True, False),
        (6, True, True, True, True, True),
        (7, True, True, True, True, True),
    ],
)
def test_a_ruleset_handles_every_right_its_abi_knows(
    abi: int, has_refer: bool, has_truncate: bool, has_net: bool, has_ioctl: bool, has_scopes: bool
) -> None:
    handled = landlock.handled_for(abi)
    assert bool(handled.fs & landlock.FS_REFER) is has_refer
    assert bool(handled.fs & landlock.FS_TRUNCATE) is has_truncate
    assert bool(handled.fs & landlock.FS_IOCTL_DEV) is has_ioctl
    assert (handled.net == landlock.NET_BIND_TCP | landlock.NET_CONNECT_TCP) is has_net
    scopes = landlock.SCOPE_ABSTRACT_UNIX_SOCKET | landlock.SCOPE_SIGNAL
    assert (handled.scoped == scopes) is has_scopes
    assert handled.fs & landlock.FS_EXECUTE


def test_read_allows_reading_and_nothing_else() -> None:
    rights = landlock.rights_for(Access.READ, is_directory=True, handled=landlock.handled_for(7))
    assert rights == landlock.FS_READ_FILE | landlock.FS_READ_DIR


def test_write_allows_every_modifying_right_but_not_execute() -> None:
    handled = landlock.handled_for(7)
    rights = landlock.rights_for(Access.WRITE, is_directory=True, handled=handled)
    assert rights == handled.fs & ~landlock.FS_EXECUTE


def test_execute_allows_reading_and_running_but_not_writing() -> None:
    rights = landlock.rights_for(Access.EXECUTE, is_directory=True, handled=landlock.handled_for(7))
    assert rights == landlock.FS_READ_FILE | landlock.FS_READ_DIR | landlock.FS_EXECUTE


def test_a_file_grant_carries_no_directory_only_right() -> None:
    handled = landlock.handled_for(7)
    rights = landlock.rights_for(Access.WRITE, is_directory=False, handled=handled)
    assert rights == (
        landlock.FS_READ_FILE
        | landlock.FS_WRITE_FILE
        | landlock.FS_TRUNCATE
        | landlock.FS_IOCTL_DEV
    )


def test_rights_unknown_to_an_older_abi_are_not_asked_for() -> None:
    rights = landlock.rights_for(Access.WRITE, is_directory=True, handled=landlock.handled_for(2))
    assert not rights & (landlock.FS_TRUNCATE | landlock.FS_IOCTL_DEV)


def test_a_kernel_without_scoping_is_reported_as_degraded_not_refused() -> None:
    from sandbx.boundary._plan import degraded_on

    assert degraded_on(7) == ()
    assert degraded_on(6) == ()
    (note,) = degraded_on(5)
    assert "abstract Unix sockets and signals" in note
