"""Fixtures for every suite; the helpers themselves live in tests/support.py."""

from tests.support import sbx

__all__ = ["sbx"]
