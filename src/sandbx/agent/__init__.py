"""The agent: one turn of a model using tools, behind the approval gate.

It sees a ``Provider`` (never an SDK) and a ``ToolBox`` (never a process).
"""

from sandbx.agent._gate import ApproveWhen, Asker, Gate, NoTerminal, Terminal, TerminalGone
from sandbx.agent._system_prompt import system_prompt
from sandbx.agent._turn import (
    History,
    Sink,
    Turn,
    TurnEnd,
    TurnInterrupted,
    TurnResult,
    TurnSettings,
)

__all__ = [
    "ApproveWhen",
    "Asker",
    "Gate",
    "History",
    "NoTerminal",
    "Sink",
    "Terminal",
    "TerminalGone",
    "Turn",
    "TurnEnd",
    "TurnInterrupted",
    "TurnResult",
    "TurnSettings",
    "system_prompt",
]
