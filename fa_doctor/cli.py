"""Command line: parse options, run a command, pick a renderer, map the report to an exit code."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from fa_doctor import __version__
from fa_doctor.report import EXIT_ERROR, Report, error_report

app = typer.Typer(
    name="fa-doctor",
    help="Diagnose FlashAttention (FA2/FA3/FA4) installs before an LLM server starts.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fa-doctor {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """fa-doctor: find broken, shadowed and mis-pinned FlashAttention installs, and say how to fix them."""


def emit(report: Report, *, as_json: bool, verbose: bool, color: bool) -> None:
    if as_json:
        from fa_doctor.render.json import render_json

        sys.stdout.write(render_json(report) + "\n")
        sys.stdout.flush()
        return
    from fa_doctor.render.human import HumanRenderer

    stream = sys.stderr if report.error else sys.stdout
    HumanRenderer(stream, verbose=verbose, color=color).render(report)


def _gpu_list(value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",")]
    if not parts or not all(p.isascii() and p.isdigit() and len(p) <= 4 for p in parts):
        raise typer.BadParameter(f"{value!r}: expected CUDA indices such as 0,2", param_hint="--gpus")
    return tuple(dict.fromkeys(int(p) for p in parts))


@app.command()
def check(
    ctx: typer.Context,
    python: Optional[str] = typer.Option(
        None, "--python", metavar="PATH", help="Interpreter the server runs with (default: this one)."
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Show every finding with evidence and timings."),
    strict: bool = typer.Option(False, "--strict", help="Warnings fail too (exit 1)."),
    no_smoke: bool = typer.Option(False, "--no-smoke", help="Static check only: run no kernel."),
    smoke_all: bool = typer.Option(False, "--all", help="Smoke-test every installed FA implementation."),
    require_gpu: bool = typer.Option(False, "--require-gpu", help="No GPU (or a skipped smoke test) fails."),
    timeout: float = typer.Option(300.0, "--timeout", min=1.0, help="Seconds allowed per smoke-test child."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass fa-doctor's FA4 compile cache."),
    attention_backend: Optional[str] = typer.Option(
        None, "--attention-backend", metavar="NAME", help="As given to SGLang (fa3, fa4, flashinfer, ...)."
    ),
    prefill_backend: Optional[str] = typer.Option(None, "--prefill-attention-backend", metavar="NAME"),
    decode_backend: Optional[str] = typer.Option(None, "--decode-attention-backend", metavar="NAME"),
    gpus: Optional[str] = typer.Option(
        None, "--gpus", metavar="LIST", help="Check and smoke-test only these CUDA indices, e.g. 0,2."
    ),
    no_color: bool = typer.Option(False, "--no-color", help="No colours (NO_COLOR is honoured too)."),
) -> None:
    """Diagnose the FlashAttention install of a Python environment."""
    from fa_doctor.probes.target import TargetError, TargetProbe

    wanted = python or sys.executable
    early = (ctx.obj or {}).get("early_target") if isinstance(ctx.obj, dict) else None
    # fa_doctor.entry started it before typer loaded; otherwise start it now, overlapping the imports below.
    pending = early if isinstance(early, TargetProbe) and early.python == wanted else TargetProbe(wanted)
    from fa_doctor.commands.check import CheckOptions, run_check
    from fa_doctor.facts import BackendFlags
    from fa_doctor.render.progress import progress_to_stderr

    options = CheckOptions(
        python=python,
        flags=BackendFlags(attention_backend, prefill_backend, decode_backend),
        smoke=not no_smoke,
        smoke_all=smoke_all,
        require_gpu=require_gpu,
        strict=strict,
        timeout=timeout,
        use_cache=not no_cache,
        gpu_indices=_gpu_list(gpus),
    )
    color = not no_color and "NO_COLOR" not in os.environ
    try:
        with progress_to_stderr(color=color) as progress:
            report = run_check(options, progress, pending)
    except TargetError as exc:
        report = error_report("check", str(exc))
    emit(report, as_json=as_json, verbose=verbose, color=color)
    raise typer.Exit(report.exit_code)


def main(argv: list[str] | None = None, early: object = None) -> None:
    """No traceback reaches the user, and --json always gets one JSON document. `early`: a TargetProbe already
    started by fa_doctor.entry."""
    args = sys.argv[1:] if argv is None else argv
    as_json = "--json" in args
    try:
        code = app(args=args, prog_name="fa-doctor", standalone_mode=False, obj={"early_target": early})
    except KeyboardInterrupt:
        sys.stderr.write("fa-doctor: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:  # `fa-doctor check | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_ERROR)
    except Exception as exc:
        usage = hasattr(exc, "exit_code") and hasattr(exc, "format_message")
        message = exc.format_message() if usage else f"internal error: {type(exc).__name__}: {exc}"  # type: ignore[attr-defined]
        if os.environ.get("FA_DOCTOR_DEBUG") and not usage:
            raise
        if as_json:
            emit(error_report("check", message), as_json=True, verbose=False, color=False)
        elif usage and hasattr(exc, "show"):
            exc.show()
        else:
            sys.stderr.write(f"fa-doctor: {message}\n")
        sys.exit(EXIT_ERROR)
    sys.exit(code if isinstance(code, int) else 0)
