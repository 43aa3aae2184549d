"""The gate's decisions without a terminal, and what reaches a person's screen."""

import pytest

from sandbx.agent import ApproveWhen, Gate, TerminalGone, system_prompt
from sandbx.agent._display import REPLACEMENT, shown_safely
from sandbx.tools import TOOL_NAMES


def test_read_only_tools_are_approved_without_a_flag() -> None:
    gate = Gate(
        approved=frozenset({"read", "ls", "grep", "find"}), when=ApproveWhen.RUN, terminal=None
    )
    for tool in ("read", "ls", "grep", "find"):
        assert gate.decide(tool, {"path": "."}).approved


@pytest.mark.parametrize("tool", ["write", "edit", "bash"])
def test_a_tool_not_approved_is_refused_naming_the_flag(tool: str) -> None:
    gate = Gate(approved=frozenset({"read"}), when=ApproveWhen.RUN, terminal=None)
    verdict = gate.decide(tool, {})
    assert not verdict.approved
    assert (
        verdict.why == f"the `{tool}` tool is not approved for this run: pass --allow-tool {tool}"
    )


def test_approve_call_without_a_terminal_refuses_the_call_as_terminal_gone() -> None:
    gate = Gate(approved=frozenset(TOOL_NAMES), when=ApproveWhen.CALL, terminal=None)
    assert gate.decide("read", {"path": "x"}).approved
    with pytest.raises(TerminalGone):
        gate.decide("bash", {"command": "true"})


@pytest.mark.parametrize(
    "hostile",
    ["\x1b[2J", "\x1b]0;title\x07", "a\u202eb", "zero\u200bwidth", "\x9b31m", "\r\x08", "\ufeff"],
)
def test_control_bidi_and_invisible_characters_are_replaced(hostile: str) -> None:
    shown = shown_safely(hostile)
    assert all(ch.isprintable() for ch in shown)
    assert REPLACEMENT in shown


def test_long_arguments_are_cut_with_a_marker() -> None:
    assert shown_safely("x" * 600) == "x" * 512 + "… [88 more characters]"


def test_the_system_prompt_names_tools_and_roots_before_the_users_text() -> None:
    text = system_prompt(
        approved={"read", "bash"},
        readable=["/srv"],
        writable=["/srv/out"],
        working_directory="/srv",
        network="denied",
        extra="Answer in French.",
    )
    assert text.index("Approved tools: bash, read.") < text.index("Answer in French.")
    assert "Readable roots: /srv" in text
    assert "Writable roots: /srv/out" in text
    assert text.endswith("\n\nAnswer in French.")
