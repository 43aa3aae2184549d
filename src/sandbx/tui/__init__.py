"""The terminal screen for one turn (Textual): the same turn as agent-run, watched and stoppable."""

from sandbx.tui._app import PROMPT_MARK, ROW_MARK, ScreenLine, TurnScreen, model_text

__all__ = ["PROMPT_MARK", "ROW_MARK", "ScreenLine", "TurnScreen", "model_text"]
