"""Fixtures for the agent-run end-to-end tests; the helpers live in agent_support.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.agent_support import SECRET
from tests.support import Sandbx


@pytest.fixture
def outside(sbx: Sandbx) -> Path:
    """A directory beside the project, under no grant, holding one secret file."""
    directory = sbx.workdir.parent / "outside"
    directory.mkdir()
    secret = directory / "secret.txt"
    secret.write_text(SECRET)
    secret.chmod(0o644)
    return directory
