"""Findings from one kernel smoke test (docs/smoke.md lists the ids). Machine-specific reinstalls come from the
caller's `reinstall(key, problem)`; the remedies here use the target interpreter's own path."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from fa_doctor.catalog import ecosystem, names
from fa_doctor.diagnose.checks.remedies import planned
from fa_doctor.diagnose.derive.requires import version_of
from fa_doctor.knowledge.classify import ImportProblem
from fa_doctor.model.actions import RunCommand
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.intents import ReinstallSame
from fa_doctor.model.lines import Lines
from fa_doctor.smoke import SmokeResult

Reinstall = Callable[[str, ImportProblem | None], tuple[Remedy, ...]]
_STDERR_LINES = 12
_GPU_ARCH = ("nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_PY = "{py}"
# Causes whose remedy needs nothing but the interpreter's path ({py}), as argv.
_SIMPLE: dict[str, tuple[str, tuple[tuple[str, ...], ...]]] = {
    "no_kernel_image": (
        "Install a build that contains code for this GPU's architecture: FA2 2.7.4 or newer built with CUDA 12.8+ "
        f"for sm_100/sm_120, FA4 ({names.FLASH_ATTN_4}) on Blackwell; FA3 runs on sm_80 and sm_90 only.",
        (_GPU_ARCH,),
    ),
    "gpu_too_old": (
        "FlashAttention needs an Ampere (sm_80) or newer GPU: use another attention backend on this GPU.",
        (_GPU_ARCH,),
    ),
    "driver_too_old": (
        "Upgrade the NVIDIA driver: `nvidia-smi` shows the driver and the highest CUDA version it supports.",
        (("nvidia-smi",),),
    ),
    "no_cuda": (
        "Install a CUDA build of torch (not +cpu) in this interpreter and check that the driver works.",
        ((_PY, "-c", "import torch; print(torch.__version__, torch.cuda.is_available())"), ("nvidia-smi",)),
    ),
    "sgl_kernel_fa3": (
        "sgl_kernel hides the real error; import its FA3 extension directly to see it.",
        ((_PY, "-c", "import sgl_kernel.flash_ops"),),
    ),
}


def _run(py: str, *argvs: tuple[str, ...]) -> tuple[RunCommand, ...]:
    return tuple(RunCommand(tuple(py if a == _PY else a for a in argv)) for argv in argvs)


def _import_line(module: str) -> str | None:
    """`import <module>` for a well-formed module name; None for anything else (it comes from the target)."""
    return f"import {module}" if _MODULE.match(module) else None


def smoke_findings(result: SmokeResult, *, reinstall: Reinstall) -> list[Finding]:
    return [_BUILD.get(result.status, _crashed)(result, reinstall)]


def skipped_finding(reason: str, *, require_gpu: bool) -> Finding:
    return Finding(
        id="smoke.skipped",
        severity=Severity.FAIL if require_gpu else Severity.INFO,
        title=f"Kernel smoke test skipped: {reason}",
        detail="No FlashAttention kernel was run, so only the static checks speak for this install."
        + (" --require-gpu makes this a failure." if require_gpu else ""),
        evidence={"reason": reason, "require_gpu": require_gpu},
        remedies=(
            Remedy(
                "Run fa-doctor with the interpreter that will serve the model, on the GPU machine, "
                "so the smoke test can run a kernel.",
                actions=(RunCommand(("fa-doctor", "check", "--python", "/path/to/server/python")),),
            ),
        ),
    )


# Left out of evidence: the key and phases are rewritten, the error is spread into its own fields, and the
# output tails are long (the crash finding adds the stderr lines that matter).
_OMIT = frozenset({"key", "phases", "error", "stdout_tail", "stderr_tail"})


def _timings(r: SmokeResult) -> str:
    keys = ("import", "first_call", "check", "total")
    parts = [f"{key.replace('_', ' ')} {r.phases[key]:.2f} s" for key in keys if key in r.phases]
    return "phases: " + ", ".join(parts) if parts else ""


def _case_lines(r: SmokeResult, only_bad: bool) -> list[str]:
    lines = []
    for c in (c for c in r.cases if not (only_bad and c.passed)):
        err = f"{c.max_abs_err:.4g}" if c.max_abs_err is not None else "n/a"
        took = f", {c.seconds:.2f} s" if c.seconds is not None else ""
        compared = f"max abs err {err} {'<=' if c.passed else '>'} tolerance {c.tolerance:g}{took}"
        lines.append(f"{c.name}: {c.error if c.error is not None else compared}")
    return lines


def _finding(
    fid: str, r: SmokeResult, title: str, lines: Iterable[str], remedies: Iterable[Remedy] = (), **extra: Any
) -> Finding:
    """A finding about `r` (each but smoke.passed fails): its key leads the title, empty lines leave the detail."""
    severity = Severity.OK if fid == "smoke.passed" else Severity.FAIL
    detail = Lines(line for line in lines if line)
    doc = {k: v for k, v in r.to_dict().items() if k not in _OMIT}
    evidence = {"implementation": r.key, "phases": {k: round(v, 3) for k, v in r.phases.items()}, **doc, **extra}
    return Finding(fid, severity, f"{r.key}: {title}", detail, evidence, tuple(remedies))


def _passed(r: SmokeResult, reinstall: Reinstall) -> Finding:
    del reinstall
    lines = [*_case_lines(r, only_bad=False), _timings(r)]
    if r.warnings:
        first = r.warnings[0] if len(r.warnings[0]) <= 160 else r.warnings[0][:157] + "..."
        lines.append(f"{len(r.warnings)} warning(s) on first use, recorded but harmless: {first}")
    where = f" on {r.device_name}" if r.device_name else ""
    title = f"{len(r.cases)} FA kernel calls{where} match the fp32 reference"
    return _finding("smoke.passed", r, title, lines)


def _mismatch(r: SmokeResult, reinstall: Reinstall) -> Finding:
    bad = [c.name for c in r.cases if not c.passed]
    title = f"FA output differs from the fp32 reference in {len(bad)} of {len(r.cases)} cases"
    wrong = Remedy(
        "The kernel ran but gave wrong numbers, which a server would not notice. Reinstall the build made "
        "for this GPU and torch; if it persists, report it upstream with this output (`--json`)."
    )
    lines = [*_case_lines(r, only_bad=True), _timings(r)]
    return _finding("smoke.mismatch", r, title, lines, (wrong, *reinstall(r.key, None)), failing_cases=bad)


def _failed(r: SmokeResult, reinstall: Reinstall) -> Finding:
    """`failed` (the call raised) or `import_failed` (import.failed, no timings)."""
    p = r.error
    imported = r.status == "import_failed"
    message = p.message if p else "the import failed" if imported else "the FA call failed"
    detail = [p.summary if p else "", message, *(f"caused by: {c}" for c in (p.chain if p else ()))]
    if imported:
        title = f"`import {r.module}` fails" + (f": {p.summary}" if p else "")
    elif p is not None and p.evidence.get("stage") == "device":
        title = f"no kernel could run: {p.summary}"  # the child's torch sees no GPU
    else:
        title = f"the FA kernel call raised {message.splitlines()[0][:160]}"
    remedies = (*_cause_remedies(r, p), *reinstall(r.key, p))
    fid = "import.failed" if imported else "smoke.failed"
    return _finding(fid, r, title, [*detail, "" if imported else _timings(r)], remedies, **_problem_evidence(p))


def _crashed(r: SmokeResult, reinstall: Reinstall) -> Finding:
    if r.signal:
        how = f"was killed by {r.signal}"
    elif r.returncode is not None:
        how = f"exited with code {r.returncode} before reporting a result"
    else:
        how = "could not be started"
    during = f" during {r.last_phase.replace('_', ' ')}" if r.last_phase else ""
    tail_lines = r.stderr_tail.strip().splitlines()[-_STDERR_LINES:]
    line = _import_line(r.module)
    native = Remedy(
        "A crash in native code takes the server down the same way. Reproduce it with Python's fault handler "
        "to see where it dies, then reinstall a build that matches this GPU, torch and CUDA.",
        actions=_run(r.python or "python", (_PY, "-X", "faulthandler", "-c", line)) if line else (),
    )
    # the child's own lines stay lines (Lines), each escaped on its own by the renderers' boundary
    lines = [_timings(r), *(["last lines of stderr:", *tail_lines] if tail_lines else [])]
    title, remedies = f"the smoke-test process {how}{during}", (native, *reinstall(r.key, None))
    return _finding("smoke.crashed", r, title, lines, remedies, stderr_tail="\n".join(tail_lines))


def _timeout(r: SmokeResult, reinstall: Reinstall) -> Finding:
    del reinstall
    during = f" (it was in {r.last_phase.replace('_', ' ')})" if r.last_phase else ""
    longer = RunCommand(("fa-doctor", "check", "--timeout", f"{max(600, 2 * r.timeout):g}"))
    remedies = [Remedy("Allow more time for the smoke test.", actions=(longer,))]
    if r.api == "cute":
        why = (
            "FA4 imports in about 9 s and JIT-compiles each kernel shape on its first call (3-5 s each on an "
            "H200), so a cold first run needs far longer than later ones."
        )
        remedies.append(
            Remedy(
                "Keep the FA4 compile cache enabled (the default) so that later runs load the compiled kernels."
                + (f" Cache folder: {r.cache_dir}" if r.cache_dir else " It was disabled for this run.")
            )
        )
    else:
        why = "A compiled kernel should finish in milliseconds: a hang points at the GPU, driver or build."
        remedies.append(
            Remedy("Check that the GPU is healthy and not held by another process.", actions=_run("", ("nvidia-smi",)))
        )
    title = f"the smoke test did not finish within {r.timeout:g} s"
    lines = [f"The child was killed after {r.timeout:g} s{during}.", why, _timings(r)]
    return _finding("smoke.timeout", r, title, lines, remedies)


# The finding each result status makes ("crashed" and anything unknown: _crashed).
_BUILD = {"passed": _passed, "mismatch": _mismatch, "failed": _failed, "timeout": _timeout, "import_failed": _failed}


def _problem_evidence(p: ImportProblem | None) -> dict[str, Any]:
    if p is None:
        return {"cause": "unknown"}
    details = {k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v) for k, v in p.evidence.items()}
    return {"cause": p.cause, "error": p.message, "chain": list(p.chain), "summary": p.summary, "details": details}


def _cause_remedies(r: SmokeResult, p: ImportProblem | None) -> tuple[Remedy, ...]:
    py = r.python or "python"
    ev = dict(p.evidence) if p else {}
    cause = p.cause if p else "unknown"
    if cause == "cute_dsl_missing":
        found = r.environment.get(names.CUTLASS_DSL) or r.environment.get(names.DSL_CORE)
        ver = version_of(str(found)) if found else None  # the child's text: only a real version goes into a command
        remedies = []
        if str(ev.get("module", "")).startswith("cutlass") and ver and py.startswith("/"):
            # From 4.6.0 on the `cutlass` package ships in libs-core; before, in the metapackage's own wheel.
            owner = names.DSL_CORE if ecosystem.exists(names.DSL_CORE, ver) else names.CUTLASS_DSL
            text = (
                f"The `cutlass` Python package of CuTe DSL {ver} ships in {owner}: reinstall it at that version, "
                "without its dependencies."
            )
            remedies.append(planned(ReinstallSame((f"{owner}=={ver}",), text)))
        remedies.append(
            Remedy(
                f"Install {names.FLASH_ATTN_4} and its CuTe DSL runtime into this interpreter's own site-packages, "
                "not with `pip install --target` or a folder on PYTHONPATH: the .pth file that puts `cutlass` on "
                "sys.path is only read in a real site directory (the reinstall below does it)."
            )
        )
        return tuple(remedies)
    if cause in _SIMPLE:
        text, argvs = _SIMPLE[cause]
        return (Remedy(text, actions=_run(py, *argvs)),)
    top = str(ev.get("module", r.module)).split(".")[0]
    if cause == "module_missing" and top == "torch":
        return (Remedy("Install torch into the interpreter that runs the server (see torch.missing)."),)
    torch = "import torch; print(torch.__version__, torch.version.cuda, torch._C._GLIBCXX_USE_CXX11_ABI)"
    actions: tuple[RunCommand, ...] = (RunCommand((py, "-c", torch)),)
    if cause == "torch_abi" and ev.get("abi") == "cxx11":
        text = (
            "Install the build whose C++ ABI matches torch: the wheel name carries cxx11abiTRUE or "
            "cxx11abiFALSE, and must equal the last value printed below."
        )
    elif cause == "torch_abi" and ev.get("abi") == "torch_version":
        text = (
            f"Reinstall the {r.key} build made for the installed torch {r.environment.get('torch', '')} (the "
            "wheel name carries torchX.Y), or install the torch version the build expects."
        )
    elif cause == "torch_abi":
        text = "The extension is incomplete or was built from mismatched sources: reinstall it from a clean build."
    elif cause == "glibc":
        text = (
            f"This build needs {ev.get('requires', 'a newer glibc')}, newer than this system's (see `ldd --version`). "
            "Use a wheel built on an older system (for FA2: 2.7.4.post1 instead of the 2.8 wheels) or build from "
            "source here."
        )
        actions = (RunCommand(("ldd", "--version")),)
    elif cause == "cuda_runtime" and str(ev.get("library", "")).startswith("libcuda.so"):
        text = "Install the NVIDIA driver; `nvidia-smi` must work before any CUDA build can."
        actions = (RunCommand(("nvidia-smi",)),)
    elif cause == "cuda_runtime":
        text = (
            f"{ev.get('library', 'a CUDA library')} is missing: install the {r.key} build made for torch's CUDA "
            "version (printed below), not one for another CUDA major."
        )
    elif cause == "module_missing":
        text = (
            f"Python cannot import '{ev.get('module', r.module)}': install it into this interpreter, and do not start "
            "the server from inside a source checkout whose folder shadows the installed package. The command shows "
            "which one is found."
        )
        code = f'import importlib.util as u; print(u.find_spec("{top}"))'
        actions = (RunCommand((py, "-c", code)),) if _MODULE.match(top) else ()
    else:
        line = _import_line(r.module)
        text = "Run the import by hand to see the full traceback."
        actions = _run(py, (_PY, "-c", line)) if line else ()
    return (Remedy(text, actions=actions),)
