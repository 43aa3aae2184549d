"""``python -m sandbx``: the same entry point as the ``sandbx`` command."""

from sandbx.cli import entry

entry()
