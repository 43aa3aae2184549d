"""The spawn path's own signal numbers are the ones the kernel and Python use."""

import signal

from sandbx.boundary import _signals


def test_the_hardcoded_numbers_match_the_signal_module() -> None:
    for number, name in _signals.NAMES.items():
        assert getattr(signal, name) == number
        assert _signals.name_of(number) == signal.Signals(number).name


def test_an_unnamed_signal_is_reported_by_number() -> None:
    assert _signals.name_of(50) == "signal 50"
