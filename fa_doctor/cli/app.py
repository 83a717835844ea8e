"""The commands, declared with typer: each one parses, starts the target and GPU probes (they run while the
command's modules load), calls `fa_doctor.commands.X.run`, delivers the `Result` and returns the exit code."""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

import typer

from fa_doctor.cli import completion
from fa_doctor.cli import options as opt
from fa_doctor.cli.early import probes as early_probes
from fa_doctor.cli.options import ENGINES, check_options, completes, given, one_of, outputs, path, seconds, whole
from fa_doctor.diagnose.derive import VALID

UsageError = typer.BadParameter.__mro__[1]  # click's, or typer's vendored copy of it (typer >= 0.26)
SET_VALUES = tuple(str(v) for v in VALID)

app = typer.Typer(
    name="fa-doctor",
    help="Diagnose FlashAttention (FA2/FA3/FA4) installs before an LLM server starts.",
    epilog=opt.EXIT_CODES,
    add_completion=False,  # ours take SHELL, and install one file without editing an rc file
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(ctx: typer.Context, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from fa_doctor import __version__

        sys.stdout.write(f"fa-doctor {__version__}\n")
        raise typer.Exit(0)


def _completion(ctx: typer.Context, param: typer.CallbackParam, value: Optional[str]) -> None:
    if value is None or ctx.resilient_parsing:
        return
    shell = one_of(completion.SHELLS)(value) or ""
    if param.name == "show_completion":
        sys.stdout.write(completion.script(shell))
    else:
        where, todo = completion.install(shell, os.environ)
        sys.stderr.write(f"fa-doctor: completion written to {where}" + (f"; {todo}" if todo else "") + "\n")
    raise typer.Exit(0)


@app.callback()
def root(
    version: bool = typer.Option(False, "-V", "--version", callback=_version, is_eager=True, help="Print the version."),
    show_completion: Optional[str] = typer.Option(
        None, "--show-completion", metavar="SHELL", callback=_completion, is_eager=True,
        autocompletion=completes(completion.SHELLS),
        help=f"Print the completion script for SHELL ({', '.join(completion.SHELLS)}).",
    ),
    install_completion: Optional[str] = typer.Option(
        None, "--install-completion", metavar="SHELL", callback=_completion, is_eager=True,
        autocompletion=completes(completion.SHELLS),
        help="Write the completion script for SHELL where that shell loads it (no rc file is edited).",
    ),
) -> None:  # fmt: skip
    pass  # the help is the app's


def app_for(word: str) -> typer.Typer:
    """The app with only the command named `word` (the whole app when `word` names none): typer builds the click
    object of every registered command (parameters, type hints) before it parses; a run needs one (10 ms of 12)."""
    import copy

    import typer.main

    one = [
        c
        for c in app.registered_commands
        if (c.name or typer.main.get_command_name(getattr(c.callback, "__name__", ""))) == word
    ]
    if not one:
        return app
    single = copy.copy(app)
    single.registered_commands = one
    return single


def _deliver(
    ctx: typer.Context, run: Any, early: Any = None, python: Optional[str] = None, **kw: Any
) -> tuple[int, Any]:
    """(exit code, Result): `run` under the signal path, its Result rendered where the options say."""
    from fa_doctor.cli.deliver import run_and_deliver

    return run_and_deliver(ctx.info_name or "fa-doctor", run, outputs(ctx.params), early, python=python, **kw)


@app.command(epilog=opt.EXIT_CODES)
def check(
    ctx: typer.Context, python: Optional[str] = opt.PYTHON, fmt: str = opt.FORMAT, as_json: bool = opt.JSON,
    output: Optional[str] = opt.OUTPUT, junit: Optional[str] = opt.JUNIT, markdown: Optional[str] = opt.MARKDOWN,
    summary: bool = opt.SUMMARY, verbose: bool = opt.VERBOSE, quiet: bool = opt.QUIET, strict: bool = opt.STRICT,
    no_smoke: bool = opt.NO_SMOKE, smoke_all: bool = opt.SMOKE_ALL, require_gpu: bool = opt.REQUIRE_GPU,
    timeout: str = opt.TIMEOUT, no_cache: bool = opt.NO_CACHE, fresh: bool = opt.FRESH,
    attention: Optional[str] = opt.ATTENTION, prefill: Optional[str] = opt.PREFILL, decode: Optional[str] = opt.DECODE,
    gpus: Optional[str] = opt.GPUS, gpu_arch: Optional[str] = opt.GPU_ARCH, no_color: bool = opt.NO_COLOR,
) -> int:  # fmt: skip
    """Diagnose the FlashAttention install of a Python environment."""
    options = check_options(ctx.params)
    early = early_probes(options)
    from fa_doctor.commands import check as command

    return _deliver(ctx, lambda progress, e: command.run(options, progress, e), early, python)[0]


@app.command(
    "exec",
    epilog=opt.EXIT_CODES_EXEC,
    options_metavar="[OPTIONS] --",
    context_settings={"allow_interspersed_args": False},
)
def exec_(
    ctx: typer.Context,
    command_args: list[str] = typer.Argument(
        ..., metavar="COMMAND", help="The server command to start (after --; its options are its own)."
    ),
    python: Optional[str] = opt.PYTHON, fmt: str = opt.FORMAT, as_json: bool = opt.JSON,
    output: Optional[str] = opt.OUTPUT, junit: Optional[str] = opt.JUNIT, markdown: Optional[str] = opt.MARKDOWN,
    summary: bool = opt.SUMMARY, verbose: bool = opt.VERBOSE, quiet: bool = opt.QUIET, strict: bool = opt.STRICT,
    no_smoke: bool = opt.NO_SMOKE, smoke_all: bool = opt.SMOKE_ALL, timeout: str = opt.TIMEOUT,
    no_cache: bool = opt.NO_CACHE, fresh: bool = opt.FRESH, gpus: Optional[str] = opt.GPUS,
    gpu_arch: Optional[str] = opt.GPU_ARCH, no_color: bool = opt.NO_COLOR,
    warn_only: bool = typer.Option(False, "--warn-only", help="Start COMMAND even when a check fails."),
    allow_no_gpu: bool = typer.Option(False, "--allow-no-gpu", help="Do not fail when no GPU is visible."),
    unset_override: bool = typer.Option(
        False, "--unset-override", help="Check and start COMMAND without SGLANG_FLASHATTENTION_VERSION."
    ),
) -> int:  # fmt: skip
    """Check, then replace fa-doctor with COMMAND (same PID); the report goes to stderr."""
    if not command_args[0]:
        raise UsageError("COMMAND is empty: give the server command after --", ctx)
    from fa_doctor.commands import exec as command  # reads COMMAND: its interpreter, folder and environment

    options = command.ExecOptions(
        check_options(ctx.params, resolve=False, require_gpu=False), tuple(command_args),
        warn_only=warn_only, allow_no_gpu=allow_no_gpu, unset_override=unset_override,
    )  # fmt: skip
    planned = command.plan(options)
    if planned[1].cannot_start is not None:  # as a shell would: one line, 127 or 126, before any check
        message, code = planned[1].cannot_start
        from fa_doctor.render.escape import escape

        sys.stderr.write(f"fa-doctor exec: {escape(message)}\n")
        return code
    early = early_probes(planned[0])
    run = lambda progress, e: command.run(options, progress, e, planned)  # noqa: E731
    code, result = _deliver(ctx, run, early, planned[0].python, stream=sys.stderr)
    if not command.may_start(result, options, code):
        return code
    return command.become(options.command, command.server_env(options))


@app.command(epilog=opt.EXIT_CODES)
def explain(
    ctx: typer.Context,
    text: Optional[str] = typer.Argument(None, metavar="TEXT", help="The error text; - reads standard input."),
    file: Optional[str] = typer.Option(None, "--file", metavar="PATH", callback=path, help="Read the error from PATH."),
    python: Optional[str] = opt.PYTHON, fmt: str = opt.FORMAT, as_json: bool = opt.JSON, verbose: bool = opt.VERBOSE,
    output: Optional[str] = opt.OUTPUT,
    limit: str = typer.Option("5", "--limit", metavar="N", callback=whole(1, 50), help="At most this many (1-50)."),
    no_color: bool = opt.NO_COLOR,
) -> int:  # fmt: skip
    """Explain a pasted error or traceback: its cause, the fixes, and the check that confirms it."""
    from fa_doctor.commands import explain as command

    options = command.ExplainOptions(text=text, file=file, python=python, limit=ctx.params["limit"])
    return _deliver(ctx, lambda progress, e: command.run(options, progress, e), None, python)[0]


@app.command(epilog=opt.EXIT_CODES)
def fix(
    ctx: typer.Context,
    unset_override: bool = typer.Option(
        False, "--unset-override", help="Print shell code that unsets SGLANG_FLASHATTENTION_VERSION (for eval)."
    ),
    set_value: Optional[str] = typer.Option(
        None, "--set", metavar="N", callback=one_of(SET_VALUES), autocompletion=completes(SET_VALUES),
        help=f"Set it to N instead: one of {', '.join(SET_VALUES)}.",
    ),
    shell: Optional[str] = opt.SHELL,
    env_files: list[str] = typer.Option(
        [], "--env-file", metavar="FILE", callback=path,
        help="Also remove (or rewrite) the override's line in FILE (repeatable).",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Show the env-file diffs, or with --apply the plan and its proofs; change nothing."
    ),
    undo: bool = typer.Option(False, "--undo", help="Put back what an unfinished apply left (its journal)."),
    discard_journal: bool = typer.Option(
        False, "--discard-journal", help="Keep what an unfinished apply left; drop its journal and saved copies."
    ),
    plan_only: bool = typer.Option(False, "--plan", help="Print the repairs of the current findings (default)."),
    apply: bool = typer.Option(False, "--apply", help="Run the repairs in the target interpreter, then re-check."),
    yes: bool = typer.Option(False, "-y", "--yes", help="Do not ask before --apply (for CI)."),
    only: list[str] = typer.Option([], "--only", metavar="FINDING_ID", help="Repair only these findings (repeatable)."),
    allow_torch_change: bool = typer.Option(
        False, "--allow-torch-change", help="Also run repairs that replace torch (never taken otherwise)."
    ),
    python: Optional[str] = opt.PYTHON, attention: Optional[str] = opt.ATTENTION, prefill: Optional[str] = opt.PREFILL,
    decode: Optional[str] = opt.DECODE, gpu_arch: Optional[str] = opt.GPU_ARCH, fmt: str = opt.FORMAT,
    output: Optional[str] = opt.OUTPUT, as_json: bool = opt.JSON, verbose: bool = opt.VERBOSE, quiet: bool = opt.QUIET,
    strict: bool = opt.STRICT, no_smoke: bool = opt.NO_SMOKE,
    timeout: str = typer.Option(
        str(opt.TIMEOUT_DEFAULT), "--timeout", metavar="SECONDS", callback=seconds, envvar="FA_DOCTOR_TIMEOUT",
        help="Seconds allowed per smoke-test child and per repair step.",
    ),
    no_color: bool = opt.NO_COLOR,
) -> int:  # fmt: skip
    """Apply what check found: unset the override (eval its output), or plan and apply the repairs."""
    if unset_override or set_value is not None or env_files:
        if plan_only or apply or undo or discard_journal:
            raise UsageError("--unset-override does not combine with --plan, --apply, --undo or --discard-journal", ctx)
        from fa_doctor.cli.deliver import deliver_fix_override
        from fa_doctor.commands import fix as command

        chosen = command.OverrideOptions(shell, int(set_value) if set_value else None, tuple(env_files), dry_run)
        return deliver_fix_override(command.unset_override(chosen), outputs(ctx.params))
    if plan_only and apply:
        raise UsageError("--plan and --apply exclude each other", ctx)
    if undo + discard_journal + apply > 1:
        raise UsageError("--undo, --discard-journal and --apply exclude each other", ctx)
    checking = check_options(ctx.params)
    early = early_probes(checking)
    from fa_doctor.cli.deliver import confirm
    from fa_doctor.commands import fix as command

    # --timeout (or FA_DOCTOR_TIMEOUT) bounds each repair step too; left out, each step keeps its own (a build: hours)
    options = command.FixOptions(
        checking, apply=apply, only=tuple(only), allow_torch_change=allow_torch_change,
        timeout=ctx.params["timeout"] if given(ctx, "timeout") else None,
        dry_run=dry_run, undo=undo, discard_journal=discard_journal,
    )  # fmt: skip
    run = lambda progress, e: command.run(options, progress, e, None if yes else confirm)  # noqa: E731
    return _deliver(ctx, run, early, python)[0]


@app.command(epilog=opt.EXIT_CODES)
def merge(
    ctx: typer.Context,
    paths: list[str] = typer.Argument(..., metavar="PATH", help="Report files, folders, or - (stdin)."),
    fmt: str = opt.FORMAT, as_json: bool = opt.JSON, junit: Optional[str] = opt.JUNIT,
    output: Optional[str] = opt.OUTPUT, markdown: Optional[str] = opt.MARKDOWN, summary: bool = opt.SUMMARY,
    verbose: bool = opt.VERBOSE, quiet: bool = opt.QUIET, strict: bool = opt.STRICT,
    expect: Optional[str] = typer.Option(
        None, "--expect", metavar="N", callback=whole(1), help="Fewer node reports fail."
    ),
    no_color: bool = opt.NO_COLOR,
) -> int:  # fmt: skip
    """Merge node reports (check --json files, folders, JSON Lines) into one fleet report."""
    from fa_doctor.commands import merge as command

    options = command.MergeOptions(tuple(paths), strict=strict, expect=ctx.params["expect"])
    return _deliver(ctx, lambda progress, e: command.run(options, progress, e))[0]


@app.command(epilog=opt.EXIT_CODES)
def fleet(
    ctx: typer.Context,
    engine: str = typer.Argument(
        ..., metavar="ENGINE", callback=one_of(ENGINES), autocompletion=completes(ENGINES),
        help=f"{' or '.join(ENGINES)}: every alive node.",
    ),
    address: Optional[str] = typer.Option(None, "--address", metavar="ADDRESS", help="Ray cluster (default: auto)."),
    node_timeout: str = typer.Option(
        "600.0", "--node-timeout", metavar="SECONDS", callback=seconds, help="Seconds a node may take."
    ),
    python: Optional[str] = opt.PYTHON, fmt: str = opt.FORMAT, as_json: bool = opt.JSON,
    output: Optional[str] = opt.OUTPUT, junit: Optional[str] = opt.JUNIT, markdown: Optional[str] = opt.MARKDOWN,
    summary: bool = opt.SUMMARY, verbose: bool = opt.VERBOSE, quiet: bool = opt.QUIET, strict: bool = opt.STRICT,
    no_smoke: bool = opt.NO_SMOKE, smoke_all: bool = opt.SMOKE_ALL, require_gpu: bool = opt.REQUIRE_GPU,
    timeout: str = opt.TIMEOUT, no_cache: bool = opt.NO_CACHE, attention: Optional[str] = opt.ATTENTION,
    prefill: Optional[str] = opt.PREFILL, decode: Optional[str] = opt.DECODE, gpus: Optional[str] = opt.GPUS,
    gpu_arch: Optional[str] = opt.GPU_ARCH, no_color: bool = opt.NO_COLOR,
) -> int:  # fmt: skip
    """Run check on every node of a cluster (ENGINE: ray) and merge the reports into one fleet report."""
    from fa_doctor.commands import fleet as command

    forwarded: list[str] = []  # the check options given here (on the line or by FA_DOCTOR_*), as click declares them
    for param in ctx.command.params:
        name, flag = param.name or "", param.opts[-1]
        value = ctx.params.get(name) if name in command.CHECK_OPTIONS.split() and given(ctx, name) else None
        if value is not None and value is not False:
            forwarded += [flag] if value is True else [flag, str(value)]
    options = command.FleetOptions(engine, address, ctx.params["node_timeout"], tuple(forwarded), strict=strict)
    return _deliver(ctx, lambda progress, e: command.run(options, progress, e))[0]
