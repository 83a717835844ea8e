"""Command line: one typer command per module of `fa_doctor/commands/`; parse options, run, deliver, exit.

No logic of its own: each command returns a `Result`; `output.deliver` renders it in the chosen format to the
right stream (and the CI files), and its exit code is the process's.
"""

from __future__ import annotations

import math
import sys
from typing import Optional

import typer

from fa_doctor import __version__
from fa_doctor.cli_options import (
    ATTENTION,
    DECODE,
    EXIT_CODES,
    EXIT_CODES_EXEC,
    FORMAT,
    FRESH,
    GPU_ARCH,
    GPUS,
    JSON,
    JUNIT,
    MARKDOWN,
    NO_CACHE,
    NO_COLOR,
    NO_SMOKE,
    PREFILL,
    PYTHON,
    QUIET,
    SMOKE_ALL,
    STRICT,
    SUMMARY,
    TIMEOUT,
    VERBOSE,
    check_options,
    confirm,
    outputs,
    valid_path,
    valid_set_value,
    valid_shell,
)

app = typer.Typer(
    name="fa-doctor",
    help="Diagnose FlashAttention (FA2/FA3/FA4) installs before an LLM server starts.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
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


@app.command(epilog=EXIT_CODES)
def check(
    ctx: typer.Context,
    python: Optional[str] = PYTHON,
    fmt: str = FORMAT,
    as_json: bool = JSON,
    junit: Optional[str] = JUNIT,
    markdown: Optional[str] = MARKDOWN,
    summary: bool = SUMMARY,
    verbose: bool = VERBOSE,
    quiet: bool = QUIET,
    strict: bool = STRICT,
    no_smoke: bool = NO_SMOKE,
    smoke_all: bool = SMOKE_ALL,
    require_gpu: bool = typer.Option(False, "--require-gpu", help="No GPU (or a skipped smoke test) fails."),
    timeout: float = TIMEOUT,
    no_cache: bool = NO_CACHE,
    fresh: bool = FRESH,
    attention: Optional[str] = ATTENTION,
    prefill: Optional[str] = PREFILL,
    decode: Optional[str] = DECODE,
    gpus: Optional[str] = GPUS,
    gpu_arch: Optional[str] = GPU_ARCH,
    no_color: bool = NO_COLOR,
) -> None:
    """Diagnose the FlashAttention install of a Python environment."""
    from fa_doctor.commands import check as command
    from fa_doctor.output import run_and_deliver

    options = check_options(**locals())
    out = outputs(fmt, as_json, verbose, no_color, junit=junit, markdown=markdown, summary=summary, quiet=quiet)
    code, _ = run_and_deliver(
        "check", lambda progress, early: command.run(options, progress, early), out, ctx, python=options.python
    )
    raise typer.Exit(code)


@app.command(
    "exec",
    context_settings={"allow_interspersed_args": False},
    epilog=EXIT_CODES_EXEC,
)
def exec_(
    ctx: typer.Context,
    command_args: list[str] = typer.Argument(..., metavar="-- COMMAND ...", help="The server command to start."),
    python: Optional[str] = PYTHON,
    fmt: str = FORMAT,
    as_json: bool = JSON,
    junit: Optional[str] = JUNIT,
    markdown: Optional[str] = MARKDOWN,
    summary: bool = SUMMARY,
    verbose: bool = VERBOSE,
    quiet: bool = QUIET,
    strict: bool = STRICT,
    no_smoke: bool = NO_SMOKE,
    smoke_all: bool = SMOKE_ALL,
    timeout: float = TIMEOUT,
    no_cache: bool = NO_CACHE,
    fresh: bool = FRESH,
    gpus: Optional[str] = GPUS,
    gpu_arch: Optional[str] = GPU_ARCH,
    no_color: bool = NO_COLOR,
    warn_only: bool = typer.Option(False, "--warn-only", help="Start COMMAND even when a check fails."),
    allow_no_gpu: bool = typer.Option(False, "--allow-no-gpu", help="Do not fail when no GPU is visible."),
    unset_override: bool = typer.Option(
        False, "--unset-override", help="Check and start COMMAND without SGLANG_FLASHATTENTION_VERSION."
    ),
) -> None:
    """Check, then replace fa-doctor with COMMAND (same PID); the report goes to stderr."""
    from fa_doctor.commands import exec as command
    from fa_doctor.output import run_and_deliver

    if not command_args[0]:
        raise typer.BadParameter("COMMAND is empty: give the server command after --", param_hint="COMMAND")

    options = command.ExecOptions(
        check_options(require_gpu=False, **locals()),
        tuple(command_args),
        warn_only=warn_only,
        allow_no_gpu=allow_no_gpu,
        unset_override=unset_override,
    )
    out = outputs(fmt, as_json, verbose, no_color, junit=junit, markdown=markdown, summary=summary, quiet=quiet)
    planned = command.plan(options)
    code, result = run_and_deliver(
        "exec",
        lambda progress, early: command.run(options, progress, early, planned),
        out,
        ctx,
        python=planned[0].python,
        stream=sys.stderr,
    )
    if not command.may_start(result, options, code):
        raise typer.Exit(code)
    raise typer.Exit(command.become(options.command, command.server_env(options)))


@app.command()
def explain(
    ctx: typer.Context,
    text: Optional[str] = typer.Argument(None, metavar="[TEXT | -]", help="The error text; - reads standard input."),
    file: Optional[str] = typer.Option(
        None, "--file", metavar="PATH", callback=valid_path, help="Read the error from PATH."
    ),
    python: Optional[str] = PYTHON,
    fmt: str = FORMAT,
    as_json: bool = JSON,
    verbose: bool = VERBOSE,
    limit: int = typer.Option(5, "--limit", min=1, max=50, help="At most this many explanations."),
    no_color: bool = NO_COLOR,
) -> None:
    """Explain a pasted error or traceback: its cause, the fixes, and the check that confirms it."""
    from fa_doctor.commands import explain as command
    from fa_doctor.output import run_and_deliver

    options = command.ExplainOptions(text=text, file=file, python=python, limit=limit)
    out = outputs(fmt, as_json, verbose, no_color, junit=None, markdown=None, summary=False)
    code, _ = run_and_deliver(
        "explain", lambda progress, early: command.run(options, progress, early), out, ctx, python=python
    )
    raise typer.Exit(code)


@app.command(epilog=EXIT_CODES)
def fix(
    ctx: typer.Context,
    unset_override: bool = typer.Option(
        False, "--unset-override", help="Print shell code that unsets SGLANG_FLASHATTENTION_VERSION (for eval)."
    ),
    set_value: Optional[str] = typer.Option(None, "--set", metavar="N", callback=valid_set_value, help="Set it to N."),
    shell: Optional[str] = typer.Option(None, "--shell", callback=valid_shell, help="bash|zsh|sh|fish|powershell."),
    env_files: list[str] = typer.Option(
        [], "--env-file", metavar="FILE", help="Also remove (or rewrite) the override's line in FILE (repeatable)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the env-file diffs; write nothing."),
    plan_only: bool = typer.Option(False, "--plan", help="Print the repairs of the current findings (default)."),
    apply: bool = typer.Option(False, "--apply", help="Run the repairs in the target interpreter, then re-check."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before --apply (for CI)."),
    only: list[str] = typer.Option([], "--only", metavar="FINDING_ID", help="Repair only these findings."),
    allow_torch_change: bool = typer.Option(
        False, "--allow-torch-change", help="Also run repairs that replace torch (never taken otherwise)."
    ),
    python: Optional[str] = PYTHON,
    attention: Optional[str] = ATTENTION,
    prefill: Optional[str] = PREFILL,
    decode: Optional[str] = DECODE,
    gpu_arch: Optional[str] = GPU_ARCH,
    fmt: str = FORMAT,
    as_json: bool = JSON,
    verbose: bool = VERBOSE,
    quiet: bool = QUIET,
    strict: bool = STRICT,
    no_smoke: bool = NO_SMOKE,
    timeout: float = TIMEOUT,
    no_color: bool = NO_COLOR,
) -> None:
    """Apply what check found: unset the override (eval its output), or plan and apply the repairs."""
    from fa_doctor.commands import fix as command
    from fa_doctor.output import deliver_fix_override, run_and_deliver

    out = outputs(fmt, as_json, verbose, no_color, junit=None, markdown=None, summary=False, quiet=quiet)
    if unset_override or set_value is not None or env_files:
        if plan_only or apply:
            raise typer.BadParameter("--unset-override does not combine with --plan or --apply")
        override = command.OverrideOptions(shell, int(set_value) if set_value else None, tuple(env_files), dry_run)
        raise typer.Exit(deliver_fix_override(command.unset_override(override), out))
    if plan_only and apply:
        raise typer.BadParameter("--plan and --apply exclude each other")
    planned = check_options(
        python=python,
        no_smoke=no_smoke,
        smoke_all=False,
        require_gpu=False,
        strict=strict,
        timeout=timeout,
        no_cache=False,
        gpus=None,
        gpu_arch=gpu_arch,
        attention=attention,
        prefill=prefill,
        decode=decode,
    )
    # --timeout bounds each repair step too; left out, each kind of step keeps its own bound (a build takes hours).
    source = ctx.get_parameter_source("timeout")
    step_timeout = timeout if source is not None and source.name != "DEFAULT" else None
    options = command.FixOptions(
        planned, apply=apply, only=tuple(only), allow_torch_change=allow_torch_change, timeout=step_timeout
    )
    confirm_with = None if yes else confirm
    code, _ = run_and_deliver(
        "fix", lambda progress, early: command.run(options, progress, early, confirm_with), out, ctx, python=python
    )
    raise typer.Exit(code)


@app.command(epilog=EXIT_CODES)
def merge(
    ctx: typer.Context,
    paths: list[str] = typer.Argument(..., metavar="PATH... | -", help="Report files, folders, or - (stdin)."),
    fmt: str = FORMAT,
    as_json: bool = JSON,
    junit: Optional[str] = JUNIT,
    markdown: Optional[str] = MARKDOWN,
    summary: bool = SUMMARY,
    verbose: bool = VERBOSE,
    quiet: bool = QUIET,
    strict: bool = STRICT,
    expect: Optional[int] = typer.Option(None, "--expect", min=1, metavar="N", help="Fewer node reports fail."),
    no_color: bool = NO_COLOR,
) -> None:
    """Merge node reports (check --json files, folders, JSON Lines) into one fleet report."""
    from fa_doctor.commands import merge as command
    from fa_doctor.output import run_and_deliver

    options = command.MergeOptions(tuple(paths), strict=strict, expect=expect)
    out = outputs(fmt, as_json, verbose, no_color, junit=junit, markdown=markdown, summary=summary, quiet=quiet)
    code, _ = run_and_deliver(
        "merge", lambda progress, early: command.run(options, progress, early), out, ctx, python=None
    )
    raise typer.Exit(code)


def _engine(value: str) -> str:
    from fa_doctor.commands.fleet import ENGINES

    if value not in ENGINES:
        raise typer.BadParameter(f"{value!r}: one of {', '.join(ENGINES)}")
    return value


def _deadline(value: float) -> float:
    if not math.isfinite(value) or value < 1:
        raise typer.BadParameter(f"{value}: needs a finite number of seconds, at least 1")
    return value


@app.command(epilog=EXIT_CODES)
def fleet(
    ctx: typer.Context,
    engine: str = typer.Argument(..., metavar="ENGINE", callback=_engine, help="ray: every alive Ray node."),
    address: Optional[str] = typer.Option(None, "--address", metavar="ADDRESS", help="Ray cluster (default: auto)."),
    deadline: float = typer.Option(
        600.0, "--node-timeout", metavar="SECONDS", callback=_deadline, help="Seconds a node may take."
    ),
    python: Optional[str] = PYTHON,
    fmt: str = FORMAT,
    as_json: bool = JSON,
    junit: Optional[str] = JUNIT,
    markdown: Optional[str] = MARKDOWN,
    summary: bool = SUMMARY,
    verbose: bool = VERBOSE,
    quiet: bool = QUIET,
    strict: bool = STRICT,
    no_smoke: bool = NO_SMOKE,
    smoke_all: bool = SMOKE_ALL,
    require_gpu: bool = typer.Option(False, "--require-gpu", help="No GPU (or a skipped smoke test) fails."),
    timeout: float = TIMEOUT,
    no_cache: bool = NO_CACHE,
    attention: Optional[str] = ATTENTION,
    prefill: Optional[str] = PREFILL,
    decode: Optional[str] = DECODE,
    gpus: Optional[str] = GPUS,
    gpu_arch: Optional[str] = GPU_ARCH,
    no_color: bool = NO_COLOR,
) -> None:
    """Run check on every node of a cluster (ENGINE: ray) and merge the reports into one fleet report."""
    from fa_doctor.commands import fleet as command
    from fa_doctor.output import run_and_deliver

    argv = command.check_argv(**locals())
    options = command.FleetOptions(engine, address, deadline, argv, strict=strict)
    out = outputs(fmt, as_json, verbose, no_color, junit=junit, markdown=markdown, summary=summary, quiet=quiet)
    code, _ = run_and_deliver(
        "fleet", lambda progress, early: command.run(options, progress, early), out, ctx, python=None
    )
    raise typer.Exit(code)


def interrupted(args: list[str], signum: int) -> None:
    """A signal that came before the command ran: the same result and exit code as one that came during it."""
    from fa_doctor.output import emit_interrupted

    sys.exit(emit_interrupted(app, args, signum))


def main(argv: list[str] | None = None, early: object = None) -> None:
    """No traceback reaches the user, and a JSON format always gets one JSON document. `early`: a TargetProbe
    already started by fa_doctor.entry."""
    from fa_doctor.output import main_guard

    args = sys.argv[1:] if argv is None else argv
    sys.exit(main_guard(app, args, early))


__all__ = ["app", "main"]
