"""The options several commands share, and their checks: a bad value is a usage error (exit 2), never silently
something else (`--timeout nan` turning the bound off). Then what the parsed values become: Outputs, CheckOptions.
No param_hint in BadParameter: click names the option (and its FA_DOCTOR_* variable)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

import typer

from fa_doctor.render.base import FORMATS
from fa_doctor.render.shell import SHELLS

ENGINES = ("ray",)  # what `fleet ENGINE` runs checks through
TIMEOUT_DEFAULT = 300.0  # --timeout of check, exec, fix and fleet; fix's own --timeout says more


def one_of(choices: Sequence[str]) -> Callable[[Optional[str]], Optional[str]]:
    def check(value: Optional[str]) -> Optional[str]:
        if value is not None and value not in choices:
            raise typer.BadParameter(f"{value!r}: one of {', '.join(choices)}")
        return value

    return check


def completes(choices: Sequence[str]) -> Callable[[str], list[str]]:
    def complete(incomplete: str) -> list[str]:
        return [c for c in choices if c.startswith(incomplete)]

    return complete


def _python(value: Optional[str]) -> Optional[str]:
    if value is not None and (not value.strip() or "\x00" in value):
        raise typer.BadParameter("needs the path of a Python interpreter, not an empty string")
    return value


def path(value: Any) -> Any:
    """A path, or the list of a repeatable option's."""
    if any(not v.strip() for v in ([value] if isinstance(value, str) else value or ())):
        raise typer.BadParameter("needs a file path, not an empty string")
    return value


# Numbers are read here, not by typer (whose message varies by release): the parameter is declared `str`; the
# command reads the converted number from ctx.params.
def seconds(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(number) or number < 1:
        raise typer.BadParameter(f"{value}: needs a finite number of seconds, at least 1")
    return number


def whole(low: int, high: Optional[int] = None) -> Callable[[Optional[str]], Optional[int]]:
    def check(value: Optional[str]) -> Optional[int]:
        if value is None:
            return None
        try:
            number = int(value.strip())
        except ValueError:
            raise typer.BadParameter(f"{value!r} is not a whole number") from None
        if number < low or (high is not None and number > high):
            raise typer.BadParameter(f"{number}: needs {low} to {high}" if high else f"{number}: needs at least {low}")
        return number

    return check


def _gpus(value: Optional[str]) -> Optional[str]:
    parts = [p.strip() for p in (value or "0").split(",")]
    if not all(p.isascii() and p.isdigit() and len(p) <= 4 for p in parts):
        raise typer.BadParameter(f"{value!r}: expected CUDA indices such as 0,2")
    return value


def _gpu_arch(value: Optional[str]) -> Optional[str]:
    if value is not None:
        from fa_doctor.diagnose.checks.binary import parse_gpu_arch

        try:
            parse_gpu_arch(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return value


PYTHON = typer.Option(
    None, "--python", metavar="PATH", callback=_python, envvar="FA_DOCTOR_PYTHON",
    help="Interpreter the server runs with (default: this one).",
)  # fmt: skip
FORMAT = typer.Option(
    "human", "--format", metavar="FORMAT", callback=one_of(FORMATS), autocompletion=completes(FORMATS),
    envvar="FA_DOCTOR_FORMAT", help=f"The report's format: one of {', '.join(FORMATS)}.",
)  # fmt: skip
JSON = typer.Option(False, "--json", help="Same as --format json: one JSON document.")
JUNIT = typer.Option(None, "--junit-xml", metavar="PATH", callback=path, help="Also write JUnit XML to PATH.")
MARKDOWN = typer.Option(None, "--markdown", metavar="PATH", callback=path, help="Also write a Markdown summary.")
OUTPUT = typer.Option(
    None, "-o", "--output", metavar="PATH", callback=path,
    help="Write the report to PATH instead of stdout (replaced whole; a link there is refused).",
)  # fmt: skip
SUMMARY = typer.Option(False, "--step-summary", help="Append the Markdown summary to $GITHUB_STEP_SUMMARY.")
VERBOSE = typer.Option(
    False, "-v", "--verbose", envvar="FA_DOCTOR_VERBOSE", help="Show every finding with evidence and timings."
)
QUIET = typer.Option(
    False, "-q", "--quiet", envvar="FA_DOCTOR_QUIET", help="Only the verdict line and what fails; no progress."
)
STRICT = typer.Option(False, "--strict", envvar="FA_DOCTOR_STRICT", help="Warnings fail too (exit 1).")
NO_SMOKE = typer.Option(False, "--no-smoke", envvar="FA_DOCTOR_NO_SMOKE", help="Static check only: run no kernel.")
SMOKE_ALL = typer.Option(False, "--all", help="Smoke-test every installed FA implementation.")
REQUIRE_GPU = typer.Option(False, "--require-gpu", help="No GPU (or a skipped smoke test) fails.")
TIMEOUT = typer.Option(
    str(TIMEOUT_DEFAULT), "--timeout", metavar="SECONDS", callback=seconds, envvar="FA_DOCTOR_TIMEOUT",
    help="Seconds allowed per smoke-test child.",
)  # fmt: skip
NO_CACHE = typer.Option(False, "--no-cache", envvar="FA_DOCTOR_NO_CACHE", help="Bypass fa-doctor's FA4 compile cache.")
FRESH = typer.Option(False, "--fresh", help="Run the smoke test even if a passing verdict still holds.")
GPUS = typer.Option(
    None, "--gpus", metavar="LIST", callback=_gpus, envvar="FA_DOCTOR_GPUS",
    help="Check and smoke-test only these CUDA indices, e.g. 0,2.",
)  # fmt: skip
GPU_ARCH = typer.Option(
    None, "--gpu-arch", metavar="LIST", callback=_gpu_arch, envvar="FA_DOCTOR_GPU_ARCH",
    help="Judge compiled FA extensions for these GPUs (sm_90,sm_100 or 9.0,10.0).",
)  # fmt: skip
NO_COLOR = typer.Option(
    False, "--no-color", help="No colours (NO_COLOR, FORCE_COLOR: force-color.org's order; this flag wins)."
)
ATTENTION = typer.Option(
    None, "--attention-backend", metavar="NAME", help="As given to SGLang (fa3, fa4, flashinfer, ...)."
)
PREFILL = typer.Option(None, "--prefill-attention-backend", metavar="NAME", help="As given to SGLang.")
DECODE = typer.Option(None, "--decode-attention-backend", metavar="NAME", help="As given to SGLang.")
SHELL = typer.Option(
    None, "--shell", metavar="SHELL", callback=one_of(SHELLS), autocompletion=completes(SHELLS),
    help=f"The shell the code is for (default: the calling one): one of {', '.join(SHELLS)}.",
)  # fmt: skip

# The exit-code contract (README, docs/architecture.md), at the foot of --help.
EXIT_CODES = (
    "Exit codes: 0 healthy or warnings only; 1 a failing finding (with --strict, a warning too); 2 misuse or an "
    "internal error; 130, 143, 129 interrupted by SIGINT, SIGTERM, SIGHUP. Options marked [env var: FA_DOCTOR_...] "
    "take their default from that variable (an invalid value is a usage error, exit 2)."
)
EXIT_CODES_EXEC = (
    "Exit codes: 1 a failing finding (COMMAND not started, unless --warn-only); 2 misuse or an internal error; "
    "126 COMMAND is not executable or its #! interpreter is missing, 127 COMMAND not found; 130, 143, 129 "
    "interrupted by SIGINT, SIGTERM, SIGHUP; once COMMAND runs, its own exit code (fa-doctor becomes it)."
)


# ---- what the parsed options become ------------------------------------------------------------------------


def given(ctx: typer.Context, name: str) -> bool:
    """Given on the command line or by its FA_DOCTOR_* variable, not left at the default."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


def outputs(p: Mapping[str, Any]) -> Any:
    from fa_doctor.cli.deliver import Outputs

    fmt = "json" if p["as_json"] else str(p["fmt"])
    return Outputs(
        fmt, bool(p["verbose"]), bool(p["no_color"]), p.get("junit"), p.get("markdown"), bool(p.get("summary")),
        quiet=bool(p.get("quiet")), output=p.get("output"),
    )  # fmt: skip


def check_options(p: Mapping[str, Any], resolve: bool = True, **changes: Any) -> Any:
    """`resolve`: choose the interpreter a bare run judges (probes.target.choose); exec reads COMMAND's instead."""
    from fa_doctor.diagnose.checks.binary import parse_gpu_arch
    from fa_doctor.model.facts import BackendFlags
    from fa_doctor.model.options import CheckOptions
    from fa_doctor.probes.target import choose

    v = {**p, **changes}
    chosen = choose(v.get("python"), os.environ) if resolve else None
    return CheckOptions(
        python=chosen.python if chosen else v.get("python"),
        python_why=chosen.why if chosen else ("--python" if v.get("python") else ""),
        flags=BackendFlags(v.get("attention"), v.get("prefill"), v.get("decode")),
        smoke=not v.get("no_smoke"),
        smoke_all=bool(v.get("smoke_all")),
        require_gpu=bool(v.get("require_gpu")),
        strict=bool(v.get("strict")),
        timeout=v["timeout"],
        use_cache=not v.get("no_cache"),
        fresh=bool(v.get("fresh")),
        gpu_indices=tuple(dict.fromkeys(int(p) for p in v["gpus"].split(","))) if v.get("gpus") else None,
        gpu_arch=parse_gpu_arch(v["gpu_arch"]) if v.get("gpu_arch") else None,
    )
