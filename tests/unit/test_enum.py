"""sandbx's own Enum behaves like enum.Enum wherever sandbx relies on it."""

import copy
import pickle

import pytest

from sandbx.audit import RecordKind
from sandbx.boundary import FailureReason
from sandbx.policy import Access


def test_members_are_singletons_found_by_value_and_by_name() -> None:
    assert Access("read") is Access.READ
    assert Access(Access.READ) is Access.READ
    assert Access["WRITE"] is Access.WRITE
    assert Access.READ.name == "READ"
    assert Access.READ.value == "read"
    assert isinstance(Access.EXECUTE, Access)


def test_an_unknown_value_is_a_value_error_naming_the_class() -> None:
    with pytest.raises(ValueError, match="'nope' is not a valid FailureReason"):
        FailureReason("nope")


def test_iteration_keeps_definition_order_and_skips_methods() -> None:
    assert [member.value for member in Access] == ["read", "write", "execute"]
    assert len(Access) == 3
    assert Access.EXECUTE.flag == "--allow-exec"


def test_members_compare_by_identity_and_work_in_match() -> None:
    assert Access.READ != "read"
    assert Access("read") == Access.READ
    assert {Access.READ: 1}[Access("read")] == 1
    assert RecordKind.FAILED.level == "WARN"
    assert RecordKind.SPAWNED.level == "INFO"


def test_text_forms_match_enum() -> None:
    assert repr(Access.READ) == "<Access.READ: 'read'>"
    assert str(Access.READ) == "Access.READ"
    assert f"{Access.READ}" == "Access.READ"


def test_copies_and_pickles_are_the_member_itself() -> None:
    assert copy.copy(Access.WRITE) is Access.WRITE
    assert copy.deepcopy(Access.WRITE) is Access.WRITE
    assert pickle.loads(pickle.dumps(Access.WRITE)) is Access.WRITE  # noqa: S301 - our own bytes


def test_a_taken_value_and_a_reassigned_member_are_refused() -> None:
    from sandbx._enum import Enum

    with pytest.raises(TypeError, match="taken"):

        class _Twice(Enum):
            ONE = "x"
            TWO = "x"

    with pytest.raises(AttributeError, match="cannot be reassigned"):
        Access.READ = Access.WRITE  # type: ignore[misc]
