"""``raise unreachable(x)``: the default case of an exhaustive ``match``, checked by mypy.

``typing.assert_never`` does the same, but importing ``typing`` (which loads
``re``) costs milliseconds on every sandbox-run start, so the types are seen by
mypy alone.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Never


def unreachable(value: Never) -> AssertionError:
    """The error to raise where mypy has proven no case is left: ``raise unreachable(x)``."""
    return AssertionError(f"a case was not handled: {value!r}")
