"""The options the commands share, and their validation: a bad value is a usage error (exit 2), never silently
something else (`--timeout nan` turning the bound off, `--python ""` meaning fa-doctor's own interpreter)."""

from __future__ import annotations

import math
import sys
from typing import Any, Optional

import typer

# ---- option validation: bad values are usage errors (exit 2), never silently something else -------------
# No param_hint: click names the option, and the FA_DOCTOR_* variable when the value came from there.


def _python_path(value: str | None) -> str | None:
    if value is not None and (not value.strip() or "\x00" in value):
        raise typer.BadParameter("needs the path of a Python interpreter, not an empty string")
    return value


def _timeout(value: float) -> float:
    if not math.isfinite(value) or value < 1:
        raise typer.BadParameter(f"{value}: needs a finite number of seconds, at least 1")
    return value


def _gpu_list(value: str | None) -> str | None:
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",")]
    if not parts or not all(p.isascii() and p.isdigit() and len(p) <= 4 for p in parts):
        raise typer.BadParameter(f"{value!r}: expected CUDA indices such as 0,2")
    return value


def _gpu_arch(value: str | None) -> str | None:
    if value is None:
        return None
    from fa_doctor.commands.options import parse_gpu_arch

    try:
        parse_gpu_arch(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


def _format(value: str) -> str:
    from fa_doctor.render.base import FORMATS

    if value not in FORMATS:
        raise typer.BadParameter(f"{value!r}: one of {', '.join(FORMATS)}")
    return value


def valid_path(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise typer.BadParameter("needs a file path, not an empty string")
    return value


# ---- options shared by every command that inspects a target and reports ------------------------------------

PYTHON = typer.Option(
    None,
    "--python",
    metavar="PATH",
    callback=_python_path,
    envvar="FA_DOCTOR_PYTHON",
    help="Interpreter the server runs with (default: this one).",
)
FORMAT = typer.Option(
    "human",
    "--format",
    metavar="FORMAT",
    callback=_format,
    envvar="FA_DOCTOR_FORMAT",
    help="human|json|github|junit|markdown.",
)
JSON = typer.Option(False, "--json", help="Same as --format json: one JSON document.")
JUNIT = typer.Option(None, "--junit-xml", metavar="PATH", callback=valid_path, help="Also write JUnit XML to PATH.")
MARKDOWN = typer.Option(None, "--markdown", metavar="PATH", callback=valid_path, help="Also write a Markdown summary.")
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
TIMEOUT = typer.Option(
    300.0, "--timeout", callback=_timeout, envvar="FA_DOCTOR_TIMEOUT", help="Seconds allowed per smoke-test child."
)
NO_CACHE = typer.Option(False, "--no-cache", envvar="FA_DOCTOR_NO_CACHE", help="Bypass fa-doctor's FA4 compile cache.")
FRESH = typer.Option(False, "--fresh", help="Run the smoke test even if a passing verdict still holds.")
GPUS = typer.Option(
    None,
    "--gpus",
    metavar="LIST",
    callback=_gpu_list,
    envvar="FA_DOCTOR_GPUS",
    help="Check and smoke-test only these CUDA indices, e.g. 0,2.",
)
GPU_ARCH = typer.Option(
    None,
    "--gpu-arch",
    metavar="LIST",
    callback=_gpu_arch,
    envvar="FA_DOCTOR_GPU_ARCH",
    help="Judge compiled FA extensions for these GPUs.",
)
NO_COLOR = typer.Option(
    False, "--no-color", help="No colours (NO_COLOR, FORCE_COLOR: force-color.org's order; this flag wins)."
)
ATTENTION = typer.Option(
    None, "--attention-backend", metavar="NAME", help="As given to SGLang (fa3, fa4, flashinfer, ...)."
)
PREFILL = typer.Option(None, "--prefill-attention-backend", metavar="NAME")
DECODE = typer.Option(None, "--decode-attention-backend", metavar="NAME")


def outputs(fmt: str, as_json: bool, verbose: bool, no_color: bool, **files: Any) -> Any:
    from fa_doctor.output import Outputs

    fmt = "json" if as_json else fmt
    return Outputs(
        fmt, verbose, no_color, files["junit"], files["markdown"], files["summary"], quiet=files.get("quiet", False)
    )


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


def check_options(**kw: Any) -> Any:
    from fa_doctor.commands.options import CheckOptions, parse_gpu_arch, parse_gpus
    from fa_doctor.facts import BackendFlags

    return CheckOptions(
        python=kw["python"],
        flags=BackendFlags(kw.get("attention"), kw.get("prefill"), kw.get("decode")),
        smoke=not kw["no_smoke"],
        smoke_all=kw["smoke_all"],
        require_gpu=kw["require_gpu"],
        strict=kw["strict"],
        timeout=kw["timeout"],
        use_cache=not kw["no_cache"],
        fresh=kw.get("fresh", False),
        gpu_indices=parse_gpus(kw["gpus"]),
        gpu_arch=parse_gpu_arch(kw["gpu_arch"]) if kw["gpu_arch"] else None,
    )


def valid_set_value(value: Optional[str]) -> Optional[str]:
    if value is not None and value not in ("2", "3", "4"):
        raise typer.BadParameter(f"{value!r}: SGLANG_FLASHATTENTION_VERSION takes 2, 3 or 4", param_hint="--set")
    return value


def valid_shell(value: Optional[str]) -> Optional[str]:
    from fa_doctor.fixes.shell import SHELLS

    if value is not None and value not in SHELLS:
        raise typer.BadParameter(f"{value!r}: one of {', '.join(SHELLS)}", param_hint="--shell")
    return value


def confirm(steps: Any) -> bool:
    """Ask on the terminal; without one, --apply needs --yes."""
    from fa_doctor.result import CannotRun

    if not sys.stdin.isatty():
        raise CannotRun("--apply changes the environment: confirm with --yes when not run from a terminal")
    from fa_doctor.render.escape import escape

    sys.stderr.write("fa-doctor fix will run:\n")
    for number, step in enumerate(steps, 1):
        sys.stderr.write(f"  {number}. {escape(step.description)}\n     {escape(step.command)}\n")
    sys.stderr.write("Apply these steps? [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")
