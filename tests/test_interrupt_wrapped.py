"""A signal that lands inside a class statement during an import (a dataclass field's `__set_name__`) reaches us,
on Python 3.11, as `RuntimeError: Error calling __set_name__ ...` raised from the Interrupted. CI saw it as
"internal error", exit 2, where SIGTERM must give 143. The wrapped signal is found and goes on up."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from fa_doctor.diagnose.contain import contained
from fa_doctor.process.interrupt import Interrupted, within


class _Trap:
    def __set_name__(self, owner: Any, name: str) -> None:
        raise Interrupted(signal.SIGTERM)


def _import_under_a_signal() -> list[Any]:
    try:
        type("Served", (), {"jit": _Trap()})  # what a class statement does
    except Interrupted:
        raise  # Python 3.12 on: not wrapped
    return []


def _wrapped() -> BaseException:
    try:
        _import_under_a_signal()
    except BaseException as exc:
        return exc
    raise AssertionError("no exception")


def test_the_signal_is_found_inside_what_wraps_it() -> None:
    found = within(_wrapped())
    assert isinstance(found, Interrupted) and found.signum == signal.SIGTERM
    assert within(RuntimeError("plain")) is None
    loop = RuntimeError("a")
    loop.__context__ = loop  # a cycle ends the bounded walk
    assert within(loop) is None


def test_a_contained_check_does_not_turn_it_into_a_crash() -> None:
    with pytest.raises(Interrupted):
        contained("binary", _import_under_a_signal)


def test_the_guard_exits_128_plus_n(capsys: pytest.CaptureFixture[str]) -> None:
    from fa_doctor.cli.guard import _failed

    exc = _wrapped()
    if not isinstance(exc, Exception):
        pytest.skip("this Python does not wrap a signal raised in __set_name__")
    assert _failed(["check"], exc) == 128 + signal.SIGTERM
    assert "interrupted by SIGTERM" in capsys.readouterr().err


def test_the_entry_exits_128_plus_n_before_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """A check's probe starts before the guard is imported: a signal can land in those imports, wrapped."""
    import fa_doctor.cli
    from fa_doctor import entry

    exc = _wrapped()
    if not isinstance(exc, Exception):
        pytest.skip("this Python does not wrap a signal raised in __set_name__")

    def interrupted_import(args: list[str]) -> None:
        raise exc

    monkeypatch.setattr(fa_doctor.cli, "main", interrupted_import)
    with pytest.raises(SystemExit) as done:
        entry.main(["check", "--json"])
    assert done.value.code == 128 + signal.SIGTERM
    plain = RuntimeError("a bug, not a signal")
    monkeypatch.setattr(fa_doctor.cli, "main", lambda args: (_ for _ in ()).throw(plain))
    with pytest.raises(RuntimeError, match="a bug"):
        entry.main(["check"])
