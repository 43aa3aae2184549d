"""The seven tools a model may call: read, write, edit, ls, grep, find, bash.

Each lives in its own module, independent of the others; ``ToolBox`` routes a
call to it through the boundary. A tool never widens what the policy grants.
"""

from sandbx.tools._base import FileAccess, ToolOutcome
from sandbx.tools._toolbox import READ_ONLY_TOOLS, SPECS, TOOL_NAMES, ToolBox, ToolSpec

__all__ = [
    "READ_ONLY_TOOLS",
    "SPECS",
    "TOOL_NAMES",
    "FileAccess",
    "ToolBox",
    "ToolOutcome",
    "ToolSpec",
]
