"""Option values: text in, value out, or ValueError with the reason. A bad value is a usage error (exit 2), never
silently something else (`--timeout nan` turning the bound off, `--python ""` meaning fa-doctor's own
interpreter). The modules that own a set of valid values are imported only when that option is given."""

from __future__ import annotations

import math
from collections.abc import Sequence

_TRUE = ("1", "true", "t", "yes", "y", "on")
_FALSE = ("0", "false", "f", "no", "n", "off")


def boolean(text: str) -> bool:
    """A flag's FA_DOCTOR_* value."""
    low = text.strip().lower()
    if low in _TRUE or low in _FALSE:
        return low in _TRUE
    raise ValueError(f"{text!r} is not a valid boolean (1/0, true/false, yes/no, on/off)")


def python_path(text: str) -> str:
    if not text.strip() or "\x00" in text:
        raise ValueError("needs the path of a Python interpreter, not an empty string")
    return text


def path(text: str) -> str:
    if not text.strip():
        raise ValueError("needs a file path, not an empty string")
    return text


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of seconds") from None


def seconds(text: str) -> float:
    value = _number(text)
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"{text}: needs a finite number of seconds, at least 1")
    return value


def _integer(text: str, low: int, high: int | None = None) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if value < low or (high is not None and value > high):
        raise ValueError(f"{value}: needs {low} to {high}" if high is not None else f"{value}: needs at least {low}")
    return value


def limit(text: str) -> int:
    return _integer(text, 1, 50)


def count(text: str) -> int:
    return _integer(text, 1)


def gpu_list(text: str) -> str:
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isascii() and p.isdigit() and len(p) <= 4 for p in parts):
        raise ValueError(f"{text!r}: expected CUDA indices such as 0,2")
    return text


def gpu_arch(text: str) -> str:
    from fa_doctor.checks.binary import parse_gpu_arch

    parse_gpu_arch(text)  # ValueError says what is wrong
    return text


def _one_of(text: str, choices: Sequence[str]) -> str:
    if text not in choices:
        raise ValueError(f"{text!r}: one of {', '.join(choices)}")
    return text


def formats() -> Sequence[str]:
    from fa_doctor.render.base import FORMATS

    return FORMATS


def report_format(text: str) -> str:
    return _one_of(text, formats())


def shells() -> Sequence[str]:
    from fa_doctor.fixes.shell import SHELLS

    return SHELLS


def shell(text: str) -> str:
    return _one_of(text, shells())


def override_values() -> Sequence[str]:
    from fa_doctor.derive.pin import VALID

    return tuple(str(v) for v in sorted(VALID))


def override_value(text: str) -> str:
    if text not in override_values():
        raise ValueError(f"{text!r}: SGLANG_FLASHATTENTION_VERSION takes {', '.join(override_values())}")
    return text


def engines() -> Sequence[str]:
    from fa_doctor.commands.fleet import ENGINES

    return ENGINES


def engine(text: str) -> str:
    return _one_of(text, engines())


def completion_shells() -> Sequence[str]:
    from fa_doctor.cli.completion import SHELLS

    return tuple(SHELLS)


def completion_shell(text: str) -> str:
    return _one_of(text, completion_shells())
