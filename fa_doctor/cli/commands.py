"""From a parsed command line to a command's options, its run, and the exit code. No logic of its own: each
command returns a `Result`; `deliver` renders it in the chosen format to the right stream (and the CI files)."""

from __future__ import annotations

import sys
from typing import Any

from fa_doctor.cli.deliver import Outputs, deliver_fix_override, run_and_deliver
from fa_doctor.cli.parse import Parsed, UsageError, forwarded


def outputs(p: Parsed) -> Outputs:
    v = p.values
    return Outputs(
        "json" if v["json"] else str(v["format"]),
        bool(v["verbose"]),
        bool(v["no_color"]),
        v.get("junit"),
        v.get("markdown"),
        bool(v.get("step_summary")),
        quiet=bool(v.get("quiet")),
    )


def check_options(p: Parsed, **changes: Any) -> Any:
    from fa_doctor.commands.options import CheckOptions, parse_gpu_arch, parse_gpus
    from fa_doctor.facts import BackendFlags

    v = {**p.values, **changes}
    return CheckOptions(
        python=v.get("python"),
        flags=BackendFlags(v.get("attention"), v.get("prefill"), v.get("decode")),
        smoke=not v.get("no_smoke"),
        smoke_all=bool(v.get("smoke_all")),
        require_gpu=bool(v.get("require_gpu")),
        strict=bool(v.get("strict")),
        timeout=v["timeout"],  # every command that checks takes --timeout (spec.py holds its default)
        use_cache=not v.get("no_cache"),
        fresh=bool(v.get("fresh")),
        gpu_indices=parse_gpus(v.get("gpus")),
        gpu_arch=parse_gpu_arch(v["gpu_arch"]) if v.get("gpu_arch") else None,
    )


def check(p: Parsed, early: Any) -> int:
    from fa_doctor.commands import check as command

    options = check_options(p)
    code, _ = run_and_deliver(
        "check", lambda progress, e: command.run(options, progress, e), outputs(p), early, python=options.python
    )
    return code


def exec_(p: Parsed, early: Any) -> int:
    from fa_doctor.commands import exec as command

    words = tuple(p["command"])
    if not words[0]:
        raise UsageError("COMMAND is empty: give the server command after --", p.command)
    v = p.values
    options = command.ExecOptions(
        check_options(p, require_gpu=False),
        words,
        warn_only=bool(v["warn_only"]),
        allow_no_gpu=bool(v["allow_no_gpu"]),
        unset_override=bool(v["unset_override"]),
    )
    planned = command.plan(options)
    code, result = run_and_deliver(
        "exec",
        lambda progress, e: command.run(options, progress, e, planned),
        outputs(p),
        early,
        python=planned[0].python,
        stream=sys.stderr,
    )
    if not command.may_start(result, options, code):
        return code
    return command.become(options.command, command.server_env(options))


def explain(p: Parsed, early: Any) -> int:
    from fa_doctor.commands import explain as command

    v = p.values
    options = command.ExplainOptions(text=v["text"], file=v["file"], python=v["python"], limit=v["limit"])
    code, _ = run_and_deliver(
        "explain", lambda progress, e: command.run(options, progress, e), outputs(p), early, python=options.python
    )
    return code


def fix(p: Parsed, early: Any) -> int:
    from fa_doctor.commands import fix as command

    v, out = p.values, outputs(p)
    if v["unset_override"] or v["set_value"] is not None or v["env_files"]:
        if v["plan_only"] or v["apply"]:
            raise UsageError("--unset-override does not combine with --plan or --apply", p.command)
        set_value = int(v["set_value"]) if v["set_value"] else None
        override = command.OverrideOptions(v["shell"], set_value, tuple(v["env_files"]), bool(v["dry_run"]))
        return deliver_fix_override(command.unset_override(override), out)
    if v["plan_only"] and v["apply"]:
        raise UsageError("--plan and --apply exclude each other", p.command)
    # --timeout (or FA_DOCTOR_TIMEOUT) bounds each repair step too; left out, each kind of step keeps its own
    # bound (a build takes hours).
    options = command.FixOptions(
        check_options(p),
        apply=bool(v["apply"]),
        only=tuple(v["only"]),
        allow_torch_change=bool(v["allow_torch_change"]),
        timeout=v["timeout"] if "timeout" in p.given else None,
    )
    confirm_with = None if v["yes"] else confirm
    code, _ = run_and_deliver(
        "fix",
        lambda progress, e: command.run(options, progress, e, confirm_with),
        out,
        early,
        python=v["python"],
    )
    return code


def merge(p: Parsed, early: Any) -> int:
    from fa_doctor.commands import merge as command

    options = command.MergeOptions(tuple(p["paths"]), strict=bool(p["strict"]), expect=p["expect"])
    code, _ = run_and_deliver(
        "merge", lambda progress, e: command.run(options, progress, e), outputs(p), early, python=None
    )
    return code


def fleet(p: Parsed, early: Any) -> int:
    from fa_doctor.commands import fleet as command

    v = p.values
    options = command.FleetOptions(
        str(v["engine"]),
        v["address"],
        float(v["node_timeout"]),
        forwarded(p),
        strict=bool(v["strict"]),
    )
    code, _ = run_and_deliver(
        "fleet", lambda progress, e: command.run(options, progress, e), outputs(p), early, python=None
    )
    return code


RUN = {"check": check, "exec": exec_, "explain": explain, "fix": fix, "merge": merge, "fleet": fleet}


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
