"""derive/selection.py on facts gathered once from fake environments and then varied by hand: each SGLang default
branch at its boundary, what each FA version loads, auto-detection with two usable FAs, and backend names."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import gather_facts, vary
from fakeenv import make_env

from fa_doctor.catalog.families import BY_KEY
from fa_doctor.diagnose.derive.inventory import assess_all
from fa_doctor.diagnose.derive.selection import (
    SGLANG_0_5_23_BACKENDS,
    PhaseChoice,
    Selection,
    implementation_for,
    rejected_backend,
    select,
    sglang_default,
)
from fa_doctor.model.facts import BackendFlags, Facts
from fa_doctor.probes.sglang_rules import read_rules

HOPPER, AMPERE, BLACKWELL, SM120 = (9, 0), (8, 0), (10, 0), (12, 0)
FA4_PKG = "FA4 (flash_attn.cute from flash-attn-4)"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    """SGLang 0.5.23-like: sglang, sglang-kernel, flash-attn-4, torch cu130; one Hopper GPU."""
    env = make_env(tmp_path_factory.mktemp("server"))
    env.torch("2.11.0+cu130")
    env.sgl_kernel(torch_pin="2.11.0")
    env.sglang()
    env.fa4()
    return vary(gather_facts(env), caps=(HOPPER,))


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    """No SGLang; FA2 and FA4 both installed and healthy: two usable implementations."""
    env = make_env(tmp_path_factory.mktemp("bare"))
    env.torch()
    env.fa2(with_cute=False)
    env.fa4()
    return vary(gather_facts(env), caps=(HOPPER,))


@pytest.fixture(scope="module")
def with_flashinfer(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    env = make_env(tmp_path_factory.mktemp("flashinfer"))
    env.torch()
    env.sglang()
    env.dist("flashinfer-python", "0.6.1", {"flashinfer/__init__.py": ""}, top_level=["flashinfer"])
    return vary(gather_facts(env), caps=(AMPERE,))


@pytest.fixture(scope="module")
def no_kernel(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    """SGLang without sglang-kernel, FA4 with a broken CuTe DSL (libs-core missing)."""
    env = make_env(tmp_path_factory.mktemp("nokernel"))
    env.torch()
    env.sglang()
    env.fa4(core=False)
    return vary(gather_facts(env), caps=(HOPPER,))


def default(facts: Facts, caps: tuple[tuple[int, int], ...], cuda: str | None = "13.0", **env: str) -> tuple:
    return sglang_default(vary(facts, caps=caps, cuda=cuda, env=env))


# SGLang's default backend, each branch and boundary (reference/fa-selection.md 2.1).


def test_default_without_gpu(server: Facts) -> None:
    assert sglang_default(vary(server, caps=())) == (
        None,
        "no GPU visible: SGLang picks by GPU (fa3 on Hopper with CUDA >= 12.3)",
    )


@pytest.mark.parametrize("cuda", ["12.3", "12.4", "13.0"])
def test_hopper_with_cuda_12_3_or_newer_is_fa3(server: Facts, cuda: str) -> None:
    assert default(server, (HOPPER,), cuda) == ("fa3", "Hopper (sm_90) with torch CUDA >= 12.3")


@pytest.mark.parametrize("cuda", ["12.2", "11.8", None])
def test_hopper_with_older_cuda_is_not_fa3(server: Facts, cuda: str | None) -> None:
    assert default(server, (HOPPER,), cuda) == (
        "triton",
        "sm_90 without torch CUDA >= 12.3, so triton (flashinfer is not installed)",
    )


@pytest.mark.parametrize("cuda", ["12.8", "12.9", "13.0"])
def test_sm100_with_cuda_12_8_or_newer_is_trtllm_mha(server: Facts, cuda: str) -> None:
    assert default(server, (BLACKWELL,), cuda) == (
        "trtllm_mha",
        "SM100 (sm_100) with torch CUDA >= 12.8; fa4 instead if the model has asymmetric K/V head sizes",
    )


@pytest.mark.parametrize("cuda", ["12.7", "11.8", None])
def test_sm100_with_older_cuda_is_not_trtllm_mha(server: Facts, cuda: str | None) -> None:
    assert default(server, (BLACKWELL,), cuda) == (
        "triton",
        "sm_100 without torch CUDA >= 12.8, so triton (flashinfer is not installed)",
    )


@pytest.mark.parametrize("caps", [(AMPERE,), (SM120,), ((12, 1),), ((8, 9),)])
def test_other_gpus_without_flashinfer_get_triton(server: Facts, caps: tuple[tuple[int, int], ...]) -> None:
    major, minor = caps[0]
    assert default(server, caps) == (
        "triton",
        f"sm_{major}{minor}: neither Hopper nor SM100, so triton (flashinfer is not installed)",
    )


def test_ampere_with_flashinfer_gets_flashinfer(with_flashinfer: Facts) -> None:
    assert default(with_flashinfer, (AMPERE,)) == ("flashinfer", "sm_80: neither Hopper nor SM100, so flashinfer")


# sglang 0.5.23's is_flashinfer_available() reads it with get_bool_env_var: only "true"/"1" (any case) are true,
# anything else (yes, off, empty) is false with a warning (sglang/srt/utils/common.py get_bool_env_var).
@pytest.mark.parametrize("value", ["false", "False", "FALSE", "0", "no", "NO", "n", "N", "yes", "", "off"])
def test_flashinfer_switched_off(with_flashinfer: Facts, value: str) -> None:
    assert default(with_flashinfer, (AMPERE,), SGLANG_IS_FLASHINFER_AVAILABLE=value) == (
        "triton",
        f"sm_80: neither Hopper nor SM100, so triton (SGLANG_IS_FLASHINFER_AVAILABLE={value})",
    )


@pytest.mark.parametrize("value", ["true", "TRUE", "1"])
def test_flashinfer_left_on(with_flashinfer: Facts, value: str) -> None:
    assert default(with_flashinfer, (AMPERE,), SGLANG_IS_FLASHINFER_AVAILABLE=value)[0] == "flashinfer"


def test_flashinfer_switch_without_flashinfer(server: Facts) -> None:
    assert default(server, (AMPERE,), SGLANG_IS_FLASHINFER_AVAILABLE="true") == (
        "triton",
        "sm_80: neither Hopper nor SM100, so triton (flashinfer is not installed)",
    )


def test_gpu_0_decides_on_mixed_nodes(server: Facts) -> None:
    assert default(server, (HOPPER, AMPERE))[0] == "fa3"
    assert default(server, (AMPERE, HOPPER))[0] == "triton"


# What each FA version loads, and every reason it cannot.


def test_sglang_versions_load_its_implementations(server: Facts) -> None:
    states = assess_all(server)
    state, problems = implementation_for(3, server, states)
    assert state is states["fa3-sgl"] and problems == []
    state, problems = implementation_for(4, server, states)
    assert state is states["fa4-sglang"] and problems == []
    unvendored = vary(server, sglang=dataclasses.replace(server.sglang, fa4_vendored=False))
    assert implementation_for(4, unvendored, states)[0] is states["fa4"]


def test_sglang_rejects_versions_it_does_not_accept(server: Facts) -> None:
    states = assess_all(server)
    assert implementation_for(2, server, states) == (
        None,
        [
            "SGLang 0.5.23 has no fa2 backend (its FlashAttention backends: fa3 and fa4): `--attention-backend fa2` "
            "stops it at start-up with `invalid choice: 'fa2'`; FA2 is only a fallback inside its FA3 path"
        ],
    )
    only3 = vary(server, sglang=dataclasses.replace(server.sglang, accepted_versions=frozenset({3})))
    state, problems = implementation_for(4, only3, states)
    assert state is None and problems[0].startswith(
        "SGLang 0.5.23 has no fa4 backend (its FlashAttention backends: fa3)"
    )


def test_sglang_fa4_needs_sgl_kernel_too(no_kernel: Facts) -> None:
    states = assess_all(no_kernel)
    state, problems = implementation_for(4, no_kernel, states)
    assert state is states["fa4-sglang"]
    assert len(problems) == 2 and problems[0].startswith("nvidia-cutlass-dsl-libs-core is not installed")
    assert problems[1] == "SGLang imports sgl_kernel (merge_state_v2) even for FA4, and sglang-kernel is not installed"
    state, problems = implementation_for(3, no_kernel, states)
    assert state is states["fa3-sgl"]
    assert problems == ["FA3 (sgl_kernel.flash_attn from sglang-kernel) is not installed"]


def test_without_sglang_the_package_is_loaded(bare: Facts) -> None:
    states = assess_all(bare)
    assert implementation_for(2, bare, states) == (states["fa2"], [])
    assert implementation_for(4, bare, states) == (states["fa4"], [])
    state, problems = implementation_for(3, bare, states)
    assert state is states["fa3"]
    assert problems == ["FA3 (flash_attn_interface from flash-attn-3) is not installed"]
    assert implementation_for(5, bare, states) == (None, ["there is no FA5"])


def test_without_sglang_a_pinned_broken_fa_names_its_own_problem(no_kernel: Facts) -> None:
    facts = vary(no_kernel, sglang=None)
    states = assess_all(facts)
    state, problems = implementation_for(4, facts, states)
    assert state is states["fa4"]
    assert len(problems) == 1 and problems[0].startswith("nvidia-cutlass-dsl-libs-core is not installed")


def test_without_sglang_an_installed_fa3_is_preferred_over_a_missing_one(server: Facts) -> None:
    facts = vary(server, sglang=None, caps=(BLACKWELL,))
    states = assess_all(facts)
    state, problems = implementation_for(3, facts, states)
    assert state is states["fa3-sgl"]
    assert problems and "compute capability 10.0" in problems[0]


# Auto-detection (no SGLang): transformers' rule, the newest healthy FA.


def test_auto_picks_the_newest_of_two_usable(bare: Facts) -> None:
    states = assess_all(bare)
    assert states["fa2"].usable and states["fa4"].usable
    choice = select(bare, states, None).prefill
    assert choice == PhaseChoice(
        "prefill", None, 4, "fa4", "auto", f"auto-detection: the newest healthy FA installed is {FA4_PKG}"
    )


def test_auto_without_gpu_says_it_could_not_check(bare: Facts) -> None:
    facts = vary(bare, caps=())
    choice = select(facts, assess_all(facts), None).decode
    assert (
        choice.why
        == f"auto-detection: the newest healthy FA installed is {FA4_PKG} (no GPU visible to check it against)"
    )


def test_auto_with_nothing_usable_lists_every_problem(bare: Facts) -> None:
    facts = vary(bare, caps=((7, 5),))
    choice = select(facts, assess_all(facts), None).prefill
    assert (choice.phase, choice.version, choice.implementation, choice.source) == ("prefill", None, None, "auto")
    assert choice.why == "auto-detection found no usable FA implementation"
    assert [p.split(";")[1].strip() for p in choice.problems] == [
        "FA2 (flash-attn) runs on 8.x, 9.x, 10.x, 12.x",
        f"{FA4_PKG} runs on 8.x, 9.x, 10.x, 11.x, 12.x",
    ]


def test_auto_with_nothing_installed(bare: Facts) -> None:
    states = {k: dataclasses.replace(s, dist=None) for k, s in assess_all(bare).items()}
    assert select(bare, states, None).prefill.problems == ("no FlashAttention implementation is installed",)


@pytest.mark.parametrize("key", ["fa4-sglang", "vllm-fa"])
def test_auto_ignores_copies_inside_servers(bare: Facts, key: str) -> None:
    """SGLang's vendored FA4 and vLLM's FA are their servers' own: auto-detection (transformers) never loads them."""
    states = assess_all(bare)
    usable = dataclasses.replace(states["fa4"], impl=BY_KEY[key])
    states = {k: dataclasses.replace(s, dist=None) for k, s in states.items()}
    states[key] = usable
    assert usable.usable
    choice = select(bare, states, None).prefill
    assert (choice.version, choice.problems) == (None, ("no FlashAttention implementation is installed",))
    states[key] = dataclasses.replace(usable, broken=("it is broken",))
    assert select(bare, states, None).prefill.problems == ("no FlashAttention implementation is installed",)


# select(): the override, the flags, SGLang's default, per phase.


def test_override_pins_both_phases(server: Facts) -> None:
    states = assess_all(server)
    sel = select(server, states, 3)
    for phase, choice in zip(("prefill", "decode"), sel.phases, strict=True):
        assert choice == PhaseChoice(phase, "fa3", 3, "fa3-sgl", "override", "SGLANG_FLASHATTENTION_VERSION=3 pins FA3")
    two = select(server, states, 2).prefill
    assert (two.backend, two.version, two.implementation, two.source) == (None, 2, None, "override")
    assert "invalid choice: 'fa2'" in two.problems[0]


def test_override_without_sglang_has_no_backend_name(bare: Facts) -> None:
    choice = select(bare, assess_all(bare), 4).prefill
    assert (choice.backend, choice.version, choice.implementation, choice.problems) == (None, 4, "fa4", ())


def test_flags_per_phase(server: Facts) -> None:
    facts = vary(server, flags=BackendFlags(prefill="fa4"))
    sel = select(facts, assess_all(facts), None)
    assert sel.prefill == PhaseChoice("prefill", "fa4", 4, "fa4-sglang", "flag", "--prefill-attention-backend fa4")
    assert sel.decode == PhaseChoice(
        "decode",
        "fa3",
        3,
        "fa3-sgl",
        "sglang-default",
        "no flag for decode: SGLang's default, Hopper (sm_90) with torch CUDA >= 12.3",
    )
    both = vary(server, flags=BackendFlags(attention="fa4", decode="fa3"))
    sel = select(both, assess_all(both), None)
    assert (sel.prefill.why, sel.decode.why) == ("--attention-backend fa4", "--decode-attention-backend fa3")


def test_sglang_without_gpu_has_no_default(server: Facts) -> None:
    facts = vary(server, caps=())
    sel = select(facts, assess_all(facts), None)
    why = "SGLang's default: no GPU visible: SGLang picks by GPU (fa3 on Hopper with CUDA >= 12.3)"
    assert sel.prefill == PhaseChoice("prefill", None, None, None, "none", why)
    assert sel.decode == PhaseChoice("decode", None, None, None, "none", why)


def test_fa_flag_that_cannot_run_carries_its_problems(server: Facts) -> None:
    facts = vary(server, caps=(BLACKWELL,), flags=BackendFlags(attention="fa3"))
    choice = select(facts, assess_all(facts), None).prefill
    assert (choice.version, choice.implementation, choice.source) == (3, "fa3-sgl", "flag")
    assert len(choice.problems) == 1 and "compute capability 10.0" in choice.problems[0]
    only3 = dataclasses.replace(server.sglang, accepted_versions=frozenset({3}))
    facts = vary(server, sglang=only3, flags=BackendFlags(attention="fa4"))
    choice = select(facts, assess_all(facts), None).decode
    assert (choice.phase, choice.backend, choice.version, choice.implementation) == ("decode", "fa4", 4, None)
    assert "has no fa4 backend" in choice.problems[0]


def test_no_flag_uses_sglang_default(server: Facts) -> None:
    sel = select(server, assess_all(server), None)
    assert sel.prefill == PhaseChoice(
        "prefill", "fa3", 3, "fa3-sgl", "sglang-default", "SGLang's default: Hopper (sm_90) with torch CUDA >= 12.3"
    )
    assert (sel.sglang_default, sel.sglang_default_why) == ("fa3", "Hopper (sm_90) with torch CUDA >= 12.3")


def test_non_fa_backend_is_named(server: Facts) -> None:
    facts = vary(server, flags=BackendFlags(attention="triton"))
    choice = select(facts, assess_all(facts), None).prefill
    assert choice == PhaseChoice(
        "prefill", "triton", None, None, "flag", "--attention-backend triton; triton is not FlashAttention"
    )
    ampere = vary(server, caps=(AMPERE,))
    choice = select(ampere, assess_all(ampere), None).decode
    assert choice.why == (
        "SGLang's default: sm_80: neither Hopper nor SM100, so triton (flashinfer is not installed); "
        "triton is not FlashAttention"
    )
    assert (choice.backend, choice.version, choice.problems) == ("triton", None, ())


def test_flags_without_sglang(bare: Facts) -> None:
    facts = vary(bare, flags=BackendFlags(attention="fa4"))
    sel = select(facts, assess_all(facts), None)
    assert sel.prefill == PhaseChoice("prefill", "fa4", 4, "fa4", "flag", "--attention-backend fa4")
    assert (sel.sglang_default, sel.sglang_default_why) == (None, "SGLang is not installed")


def test_to_dict(server: Facts) -> None:
    facts = vary(server, flags=BackendFlags(prefill="fa4"))
    sel = select(facts, assess_all(facts), None)
    doc = sel.to_dict()
    assert doc["fa_version"] is None and doc["sglang_default_backend"] == "fa3"
    assert doc["sglang_default_why"] == "Hopper (sm_90) with torch CUDA >= 12.3"
    assert doc["prefill"] == {
        "phase": "prefill",
        "backend": "fa4",
        "fa_version": 4,
        "implementation": "fa4-sglang",
        "source": "flag",
        "why": "--prefill-attention-backend fa4",
        "problems": [],
    }
    assert doc["decode"]["fa_version"] == 3
    same = select(server, assess_all(server), None).to_dict()
    assert same["fa_version"] == 3
    assert Selection(sel.prefill, sel.prefill, None, "").phases == (sel.prefill, sel.prefill)


# Backend names: SGLang's argparse rejects anything outside ATTENTION_BACKEND_CHOICES.


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("flashinfr", "; did you mean `flashinfer`?"),
        ("tritn", "; did you mean `triton`?"),
        ("trtllm-mha", "; did you mean `trtllm_mha`?"),
        ("fa-3", "; did you mean `fa3`?"),
        ("fa_4", "; did you mean `fa4`?"),
    ],
)
def test_typos_are_rejected_with_a_suggestion(bare: Facts, name: str, hint: str) -> None:
    reason = rejected_backend(name, "--attention-backend", bare)
    assert reason is not None and reason.endswith(hint)
    assert f"exits at start-up with `argument --attention-backend: invalid choice: '{name}'`" in reason
    assert "SGLang (0.5.23's list)" in reason


@pytest.mark.parametrize("name", ["flash_attn", "flashattention", "fa2", "flash-attn-4", "FA2", "flash_attn_3"])
def test_fa_names_point_at_fa3_and_fa4(bare: Facts, name: str) -> None:
    reason = rejected_backend(name, "--attention-backend", bare)
    assert reason is not None
    assert reason.startswith(f"`{name}` is not an SGLang attention backend: SGLang knows fa3 and fa4 (FA2 is only")
    assert "did you mean" not in reason


def test_fa_name_in_full(bare: Facts) -> None:
    assert rejected_backend("flash_attn", "--attention-backend", bare) == (
        "`flash_attn` is not an SGLang attention backend: SGLang knows fa3 and fa4 (FA2 is only a fallback inside "
        "its FA3 path) and non-FA backends such as flashinfer and triton; SGLang (0.5.23's list) exits at start-up "
        "with `argument --attention-backend: invalid choice: 'flash_attn'`"
    )


def test_case_and_spaces_are_explained(bare: Facts) -> None:
    assert rejected_backend("FA3 ", "--decode-attention-backend", bare) == (
        "SGLang's backend names are exact and lower-case: `FA3 ` is rejected, use `fa3` (SGLang (0.5.23's list) "
        "exits at start-up with `argument --decode-attention-backend: invalid choice: 'FA3 '`)"
    )


def test_unrelated_name_lists_the_choices(bare: Facts) -> None:
    reason = rejected_backend("sdpa", "--attention-backend", bare)
    assert reason is not None and reason.endswith("; its choices are " + ", ".join(sorted(SGLANG_0_5_23_BACKENDS)))


@pytest.mark.parametrize("name", sorted(SGLANG_0_5_23_BACKENDS))
def test_every_real_choice_is_accepted(bare: Facts, name: str) -> None:
    assert rejected_backend(name, "--attention-backend", bare) is None


def test_the_installed_sglang_list_wins(server: Facts) -> None:
    custom = vary(server, sglang=dataclasses.replace(server.sglang, backend_choices=frozenset({"fa3", "mine"})))
    assert rejected_backend("mine", "--attention-backend", custom) is None
    reason = rejected_backend("flashinfer", "--attention-backend", custom)
    assert reason == (
        "`flashinfer` is not an SGLang attention backend: the installed SGLang 0.5.23 exits at start-up with "
        "`argument --attention-backend: invalid choice: 'flashinfer'`; its choices are fa3, mine"
    )
    unread = vary(server, sglang=dataclasses.replace(server.sglang, backend_choices=None))
    assert rejected_backend("flashinfer", "--attention-backend", unread) is None
    assert "the installed SGLang 0.5.23" in (rejected_backend("flashinfr", "--attention-backend", unread) or "")


def test_defaults_are_never_checked_against_the_list(server: Facts) -> None:
    """SGLang validates only what the command line names; its own default is taken as it is."""
    narrow = dataclasses.replace(server.sglang, backend_choices=frozenset({"fa3"}))
    facts = vary(server, sglang=narrow, caps=(AMPERE,))
    choice = select(facts, assess_all(facts), None).prefill
    assert (choice.backend, choice.source, choice.problems) == ("triton", "sglang-default", ())


def test_rejected_flag_becomes_a_problem_of_the_phase(bare: Facts) -> None:
    facts = vary(bare, flags=BackendFlags(prefill="flashinfr"))
    choice = select(facts, assess_all(facts), None).prefill
    reason = rejected_backend("flashinfr", "--prefill-attention-backend", facts)
    assert reason is not None and "argument --prefill-attention-backend: invalid choice" in reason
    assert choice == PhaseChoice(
        "prefill", "flashinfr", None, None, "flag", "--prefill-attention-backend flashinfr", (reason,)
    )


# Reading ATTENTION_BACKEND_CHOICES from SGLang's source.

REAL = """
ATTENTION_BACKEND_CHOICES = [
    # Common
    "triton",
    "nsa",  # Deprecated alias for "dsa"
    'fa3',
]

DRAFT_ATTENTION_BACKEND_CHOICES = ["flashinfer"]
"""


def backend_choices(text: str) -> frozenset[str] | None:
    """As a release the catalog does not hold gets them: read_rules over its server_args.py."""
    return frozenset(read_rules({"sglang/srt/server_args.py": text})["choices"]) or None  # type: ignore[call-overload]


def test_backend_choices_from_source() -> None:
    assert backend_choices(REAL) == frozenset({"triton", "nsa", "fa3"})
    assert backend_choices('ATTENTION_BACKEND_CHOICES = ["a", "b"]\nX = ["c"]\n') == frozenset({"a", "b"})
    assert backend_choices("ATTENTION_BACKEND_CHOICES = []\n") is None
    assert backend_choices("X = 1\n") is None
    assert backend_choices('ATTENTION_BACKEND_CHOICES = [\n    "a",\n' * 1) is None  # never closed
    assert backend_choices('    ATTENTION_BACKEND_CHOICES = ["indented"]\n') is None  # not module level


def test_installed_sglang_choices_are_read(tmp_path: Path) -> None:
    """A release the catalog does not hold: its own files are read."""
    env = make_env(tmp_path)
    env.torch()
    env.sglang("0.6.0")
    choices = env.site / "sglang/srt/arg_groups/choices.py"
    choices.parent.mkdir(parents=True)
    choices.write_text(REAL)
    facts = gather_facts(env)
    assert facts.sglang is not None and facts.sglang.backend_choices == frozenset({"triton", "nsa", "fa3"})
    choices.unlink()
    (env.site / "sglang/srt/server_args.py").write_text('ATTENTION_BACKEND_CHOICES = ["old"]\n')
    assert gather_facts(env).sglang.backend_choices == frozenset({"old"})  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("caps", "gpu_arch", "said"),
    [
        ((HOPPER,), (), "works here"),
        ((), ("sm_90",), "is supported on sm_90 (from --gpu-arch); no GPU here ran it"),
        (
            (),
            ("sm_75",),
            f"is not proven here: no GPU seen, and {FA4_PKG} runs on 8.x, 9.x, 10.x, 11.x, 12.x, not sm_75",
        ),
        ((), (), "is what the installed packages provide; no GPU seen: not proven here"),
    ],
)
def test_no_gpu_claim_without_a_gpu(bare: Facts, caps: tuple, gpu_arch: tuple[str, ...], said: str) -> None:
    """Issue #26: "works here" and "will run" only where a GPU was seen; --gpu-arch, or nothing, is said as such."""
    from fa_doctor.diagnose.checks.choice import check_selection

    for flags, fid in [(BackendFlags(attention="fa5"), "selection.unavailable"), (BackendFlags(), "selection.ok")]:
        facts = vary(bare, caps=caps, gpu_arch=gpu_arch, flags=flags)
        states = assess_all(facts)
        (finding,) = [f for f in check_selection(facts, states, select(facts, states, None), None) if f.id == fid]
        texts = [finding.title, finding.detail, *(r.text for r in finding.remedies)]
        assert any("works here" in t or "will run" in t for t in texts) == bool(caps), texts
        if fid == "selection.unavailable":
            assert f"Change the flag: --attention-backend fa4 {said}." in texts, texts
        elif not caps:
            assert finding.title == f"FA4 is selected for prefill and decode: {FA4_PKG}", texts
            assert finding.detail.endswith(f" It {said}."), texts
