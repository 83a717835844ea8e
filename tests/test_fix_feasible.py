"""One source of truth for what fa-doctor can do (`diagnose/plan/feasible.py`): the planner marks a remedy as
fa-doctor's (its `fa-doctor fix --apply` hint, the plan's steps) exactly when `fix --apply`'s prover accepts it,
and a step the prover refuses holds back its own repair only.

The cases of issue 26 first (each failed before the rule was shared), then two property tests with a fixed seed
(conftest's deterministic profile): over generated environments and findings, the planner's mark and apply's
prover agree on every action; over generated plans, a refused step never stops an independent one."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import gather_facts, vary
from fakeenv import FakeEnv, make_env
from fix_apply_fake import Target
from hypothesis import given, settings
from hypothesis import strategies as st

from fa_doctor.commands.check import run_checks
from fa_doctor.commands.fix import plan_steps
from fa_doctor.diagnose.derive import derive
from fa_doctor.diagnose.plan.planner import plan
from fa_doctor.fix.apply import apply
from fa_doctor.model import intents as I
from fa_doctor.model.actions import Action, MovePath, PipInstall, PipUninstall, move_aside, runnable
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.options import CheckOptions
from fa_doctor.render.shell import fix_command

OVERRIDE = "SGLANG_FLASHATTENTION_VERSION"


def planned(facts: Facts) -> list[Finding]:
    return plan(run_checks(facts, derive(facts), CheckOptions(smoke=False)), facts, ("--python", facts.target.python))


def remedy_of(findings: list[Finding], fid: str, kind: type) -> Remedy:
    found = [r for f in findings if f.id == fid for r in f.remedies if any(isinstance(a, kind) for a in r.actions)]
    assert found, [(f.id, [r.text[:60] for r in f.remedies]) for f in findings]
    return found[0]


def toolkit(root: Path, nvcc: bool) -> dict[str, str]:
    """CUDA_HOME, with or without a compiler in it (this machine's own toolkit is never the one judged)."""
    home = root / ("cuda" if nvcc else "no-cuda")
    if nvcc:
        (home / "bin").mkdir(parents=True, exist_ok=True)
        (home / "bin" / "nvcc").write_text("#!/bin/sh\n")
        (home / "bin" / "nvcc").chmod(0o755)
    return {"CUDA_HOME": str(home)}


def with_python(action: Action, python: str) -> Action:
    return dataclasses.replace(action, python=python) if isinstance(action, PipInstall) else action


# ---- the cases of issue 26 ------------------------------------------------------------------------------------


def test_the_reinstall_the_plan_offers_is_one_apply_proves(fenv: FakeEnv, tmp_path: Path) -> None:
    """flash-attn-4 sharing files with flash-attn: `--force-reinstall --no-deps` (no torch constraint: pip installs
    only what it names) is offered as fa-doctor's, and apply's prover accepts it."""
    fenv.torch()
    fenv.fa2(native=False)
    fenv.fa4()
    findings = planned(gather_facts(fenv, **toolkit(tmp_path, False)))
    remedy = remedy_of(findings, "package.conflict", PipInstall)
    assert (
        fix_command(remedy, "package.conflict")
        == f"fa-doctor fix --apply --python {fenv.python} --only package.conflict"
    )
    (action,) = remedy.actions
    assert (
        isinstance(action, PipInstall)
        and action.options == ("--force-reinstall", "--no-deps")
        and not action.constraints
    )
    t = Target(tmp_path / "t")
    t.dist("torch", "2.11.0")
    t.dist("flash-attn-4", "4.0.0b36")
    result = apply([with_python(action, str(t.python))], python=str(t.python), timeout=30, sys_path=t.sys_path)
    assert result.ok, result.refused or result.failed


def test_a_missing_torch_is_installed_without_allow_torch_change(fenv: FakeEnv, tmp_path: Path) -> None:
    """There is no torch to change: the install the plan offers needs no --allow-torch-change, and apply runs it."""
    fenv.fa4()
    findings = planned(gather_facts(fenv))
    remedy = remedy_of(findings, "torch.missing", PipInstall)
    assert not remedy.replaces_torch and not getattr(remedy, "refused", "")
    hint = fix_command(remedy, "torch.missing")
    assert hint is not None and "--allow-torch-change" not in hint
    t = Target(tmp_path / "t")
    (action,) = remedy.actions
    result = apply([with_python(action, str(t.python))], python=str(t.python), timeout=30, sys_path=t.sys_path)
    assert result.ok and result.ran[0].message.startswith("installed torch"), result.refused or result.failed
    # pip pulling torch into an install that did not name it is still refused
    t2 = Target(tmp_path / "t2")
    t2.behave(dry="pulls:torch==2.11.0")
    other = PipInstall(str(t2.python), ("flash-attn-4==4.0.0b36",), ("--no-deps",))
    assert "pip would install torch 2.11.0" in str(apply([other], python=str(t2.python), sys_path=t2.sys_path).refused)


@pytest.mark.parametrize(
    ("nvcc", "cuda", "words"),
    [(False, "13.0", "no nvcc here"), (True, None, "not a CUDA build"), (True, "13.0", "")],
)
def test_no_build_is_offered_without_nvcc_and_a_cuda_torch(
    fenv: FakeEnv, tmp_path: Path, nvcc: bool, cuda: str | None, words: str
) -> None:
    fenv.torch("2.11.0+cu130" if cuda else "2.11.0+cpu", cuda=cuda)
    fenv.fa2(native=False, with_cute=False)
    findings = planned(gather_facts(fenv, **toolkit(tmp_path, nvcc)))
    builds = [r for f in findings if f.id == "package.broken" for r in f.remedies
              if any(isinstance(a, PipInstall) and "--no-build-isolation" in a.options for a in r.actions)]  # fmt: skip
    assert builds
    for remedy in builds:
        assert (fix_command(remedy, "package.broken") is None) == bool(words)
        refused = getattr(remedy, "refused", "")
        assert words in refused if words else not refused, refused
    assert all(s.action not in builds[0].actions for s in plan_steps(findings)) == bool(words)


def test_the_override_set_to_a_value_is_said_to_work_only_where_a_gpu_shows_it(fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4()
    facts = gather_facts(fenv, **{OVERRIDE: "5"})
    for caps, gpu_arch, claim in [((), (), False), ((), ("sm_90",), False), (((9, 0),), (), True)]:
        findings = planned(vary(facts, caps=caps, **({"gpu_arch": gpu_arch} if gpu_arch else {})))
        (invalid,) = [f for f in findings if f.id == "override.invalid"]
        set_it = [r for r in invalid.remedies if any(getattr(a, "value", None) == "4" for a in r.actions)]
        assert len(set_it) == 1 and set_it[0].text.startswith(f"(1) Or set {OVERRIDE} to 4")
        assert ("works here" in set_it[0].text) == claim, set_it[0].text
        assert claim or "no GPU" in set_it[0].text


def test_a_refused_step_holds_back_its_own_repair_only(tmp_path: Path) -> None:
    t = Target(tmp_path / "t")
    t.dist("torch", "2.11.0")
    work = tmp_path / "work"
    strays = []
    for name in ("a_mod", "b_mod"):
        (work / name).mkdir(parents=True)
        strays.append(move_aside(str(work / name), str(work)))
    bad = PipInstall("/p/python", ("./local-checkout",), ("--no-deps",))
    result = apply([bad, strays[0], strays[1]], python=str(t.python), timeout=30, sys_path=t.sys_path,
                   groups=["first", "first", "second"])  # fmt: skip
    assert [s.action for s in result.refused] == [bad] and result.not_run == (strays[0],)
    assert [s.action for s in result.ran] == [strays[1]] and not result.ok and result.failed is None
    assert (work / "a_mod").is_dir() and not (work / "b_mod").exists()


# ---- property: the planner's mark is apply's verdict ----------------------------------------------------------

SCENARIOS = st.fixed_dictionaries(
    {
        "torch": st.sampled_from([None, "2.11.0", "2.13.0.custom-build"]),
        "cuda": st.booleans(),
        "nvcc": st.booleans(),
        "fa2": st.sampled_from([None, "native", "broken"]),
        "fa4": st.sampled_from([None, "whole", "no-core"]),
        "sglang": st.booleans(),
        "kernel": st.booleans(),
        "override": st.sampled_from([None, "5", "3", "4"]),
        "gpu": st.booleans(),
        "allow": st.booleans(),
    }
)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> FakeEnv:
    return make_env(tmp_path_factory.mktemp("feasible"))


def _install(env: FakeEnv, s: dict[str, object]) -> None:
    shutil.rmtree(env.site)
    env.site.mkdir()
    if s["torch"]:
        version = str(s["torch"])
        env.torch(version + ("+cu130" if s["cuda"] and "custom" not in version else ""), "13.0" if s["cuda"] else None)
    if s["fa2"]:
        env.fa2(native=s["fa2"] == "native")
    if s["fa4"]:
        env.fa4(core=s["fa4"] == "whole")
    if s["kernel"]:
        env.sgl_kernel()
    if s["sglang"]:
        env.sglang()


def _synthetic(facts: Facts, env: FakeEnv) -> list[Finding]:
    """Every intent and raw action a check can state, whatever this environment holds."""
    torch = facts.scan.index.get("torch") or "2.11.0"
    intents: list[I.Intent] = [
        I.Install("fa2"), I.Install("fa3"), I.Install("fa4"), I.Install("fa4-sglang"), I.Install("fa3-sgl"),
        I.Install("vllm-fa"), I.InstallTorch(), I.CudaTorch(torch), I.Rebuild("flash-attn", "", (), True),
        I.ReinstallSame(("flash-attn-4==4.0.0b36",), "(2)"), I.Override(3),
        I.Satisfy("sglang", (("orjson>=3", "not installed"), ("torch==2.14.1", f"torch {torch}"))),
        I.ReinstallOwners(("flash-attn 2.8.3", "flash-attn-4 4.0.0b36")),
    ]  # fmt: skip
    site = str(env.site)
    raw: list[Action] = [
        move_aside(f"{site}/torch-{torch}.dist-info", site),
        move_aside(f"{site}/torch", site),
        move_aside(f"{site}/flash_attn", site),
        PipUninstall(env.python, ("torch",)),
        PipUninstall(env.python, ("flash-attn",)),
    ]
    out = [Finding(f"synthetic.intent{i}", Severity.FAIL, "x", remedies=(Remedy("", intent=it),))
           for i, it in enumerate(intents)]  # fmt: skip
    out += [
        Finding(f"synthetic.raw{i}", Severity.FAIL, "x", remedies=(Remedy("", actions=(a,)),))
        for i, a in enumerate(raw)
    ]
    return out


@settings(max_examples=30, deadline=None)
@given(s=SCENARIOS)
def test_property_the_planner_marks_as_doable_exactly_what_apply_proves(venv: FakeEnv, s: dict[str, object]) -> None:
    from fa_doctor.fix import apply as proofs

    _install(venv, s)
    with tempfile.TemporaryDirectory() as tmp:
        tools = toolkit(Path(tmp), bool(s["nvcc"]))
        extra = {OVERRIDE: str(s["override"])} if s["override"] else {}
        facts = gather_facts(venv, **tools, **extra)
        facts = vary(facts, caps=((9, 0),) if s["gpu"] else ())
        findings = plan([*run_checks(facts, derive(facts), CheckOptions(smoke=False)), *_synthetic(facts, venv)], facts)
        # apply's own reading of the target, as `fix --apply` makes it just before its proofs
        sys_path = facts.target.sys_path
        ground = proofs.ground(proofs.read_inventory(sys_path), sys_path, {**os.environ, **tools})

        def apply_refuses(action: Action, torch_move: bool) -> str | None:
            try:
                proofs.check_feasible(action, ground, torch_move)
            except proofs.Refused as exc:
                return str(exc)
            return None

        for finding in findings:
            for remedy in finding.remedies:
                steps = [a for a in remedy.actions if runnable(a)]
                verdicts = [apply_refuses(a, remedy.replaces_torch) for a in steps]
                # the mark and the prover agree, both ways
                assert bool(remedy.refused) == any(verdicts), (finding.id, remedy.refused, verdicts)
                if not remedy.refused and steps and not finding.id.startswith("explain."):
                    assert fix_command(remedy, finding.id) is not None
                if remedy.refused:
                    assert fix_command(remedy, finding.id) is None
        moves = {a for f in findings for r in f.remedies if r.replaces_torch for a in r.actions}
        for step in plan_steps(findings, allow_torch_change=bool(s["allow"])):
            assert apply_refuses(step.action, step.action in moves and bool(s["allow"])) is None, step


# ---- property: a refused step never blocks an independent one -------------------------------------------------

PLANS = st.lists(
    st.tuples(st.integers(min_value=0, max_value=3), st.booleans()),  # (group, refused?)
    min_size=1,
    max_size=7,
)


@settings(max_examples=30, deadline=None)
@given(plan_=PLANS)
def test_property_a_refused_step_never_blocks_an_independent_one(plan_: list[tuple[int, bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t = Target(root / "t")
        t.dist("torch", "2.11.0")
        work = root / "work"
        actions: list[Action] = []
        for i, (_, refused) in enumerate(plan_):
            if refused:  # a path of the working directory: refused by the rule before anything runs
                actions.append(PipInstall("/p/python", (f"./checkout-{i}",), ("--no-deps",)))
            else:
                (work / f"m{i}").mkdir(parents=True)
                actions.append(move_aside(str(work / f"m{i}"), str(work)))
        groups = [g for g, _ in plan_]
        result = apply(actions, python=str(t.python), timeout=30, sys_path=t.sys_path, groups=groups)
        held = {g for g, refused in plan_ if refused}
        ran = {id(s.action) for s in result.ran}
        for i, (g, refused) in enumerate(plan_):
            action = actions[i]
            if refused:
                assert action in [s.action for s in result.refused]
            elif g in held:
                assert id(action) not in ran and isinstance(action, MovePath) and Path(action.path).is_dir()
            else:
                assert id(action) in ran, (plan_, result)
                assert isinstance(action, MovePath) and not Path(action.path).exists()
        assert result.ok == (not held)
