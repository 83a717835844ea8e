"""explain(): normalising real-world pastes, extracting their variable parts, ranking, remedies, bounded cost."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import FrozenInstanceError

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fa_doctor.knowledge import MAX_CHARS, NO_MATCH, explain, load
from fa_doctor.knowledge.match import normalise
from fa_doctor.model.facts import Facts
from fa_doctor.model.install import DistributionScan
from fa_doctor.model.machine import GpuDevice, GpuFacts, TargetFacts, TorchBuild
from fa_doctor.render.shell import remedy_lines

SO = "/home/alice/venv/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so"
ABI = f"ImportError: {SO}: undefined symbol: _ZN3c104cuda9SetDeviceEi"


def top(text: str) -> tuple[str, str]:
    m = explain(text)[0]
    return m.category, m.id


# ---------------------------------------------------------------------------------------------- normalisation
@pytest.mark.parametrize(
    "noisy",
    [
        "# " + ABI,  # markdown heading / comment prefix
        "> " + ABI,  # quoted reply
        "> > `" + ABI + "`",  # nested quote with inline code
        "```\n" + ABI + "\n```",  # fenced block
        "```python\r\n" + ABI + "\r\n```\r\n",  # CRLF
        "\x1b[31m" + ABI + "\x1b[0m",  # ANSI colours
        ABI.replace(": undefined", "： undefined").replace("symbol:", "symbol："),  # fullwidth colons
        ABI.replace("ImportError", "ＩｍｐｏｒｔＥｒｒｏｒ"),  # fullwidth letters
        "[rank3]: " + ABI,  # torchrun prefix
        "ERROR 07-07 02:22:12 [core.py:588] " + ABI,  # vLLM log prefix
        ABI.replace("flash_attn_2_cuda", "flash\\_attn\\_2\\_cuda"),  # markdown-escaped underscores
        "\u200b" + ABI,  # zero-width space
    ],
)
def test_noise_does_not_change_the_answer(noisy: str) -> None:
    m = explain(noisy)[0]
    assert (m.category, m.id) == ("abi-mismatch", "abi.torch-symbol")
    assert m.extracted["symbol"] == "_ZN3c104cuda9SetDeviceEi"
    assert m.extracted["library"] == "flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so"


def test_home_folders_are_scrubbed() -> None:
    flat = normalise("/home/alice/x.so /Users/bob/y C:\\Users\\carol\\z.pyd /root/keep")
    assert "alice" not in flat and "bob" not in flat and "carol" not in flat
    assert "~/x.so" in flat and "/root/keep" in flat


def test_repeated_lines_count_once_and_long_lines_are_cut() -> None:
    flat = normalise("same line\n" * 10_000 + "x" * 100_000 + "\nlast line")
    assert flat.count("same line") == 1 and len(flat) < 5_000 and flat.endswith("last line")


# ---------------------------------------------------------------------------------------------- classification
@pytest.mark.parametrize(
    "symbol",
    [
        "_ZN3c104cuda9SetDeviceEi",
        "_ZNK3c106SymInt6sym_neERKS0_",
        "_ZN2at4_ops5zeros4callEN3c108ArrayRefINS2_6SymIntEEE",
        "_ZN5torch3jit17parseSchemaOrNameERKSsb",
        "_ZN3c105ErrorC2ENS_14SourceLocationESs",
    ],
)
@pytest.mark.parametrize(
    "library", ["flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so", "common_ops.abi3.so", "_C.so"]
)
def test_any_torch_symbol_is_abi_whatever_the_library(symbol: str, library: str) -> None:
    assert top(f"ImportError: /x/{library}: undefined symbol: {symbol}")[0] == "abi-mismatch"


def test_cxx11_symbols_get_the_abi_entry() -> None:
    m = explain(f"{SO}: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationESs")[0]
    assert m.id == "abi.torch-cxx11" and m.extracted["abi"] == "cxx11"


@pytest.mark.parametrize("symbol", ["cuGreenCtxDestroy", "cuTensorMapEncodeTiled", "cuGetProcAddress_v2"])
def test_driver_api_symbols_are_not_abi(symbol: str) -> None:
    assert top(f"ImportError: /x/common_ops.abi3.so: undefined symbol: {symbol}") == (
        "driver-too-old",
        "driver.missing-api",
    )


def test_runtime_api_symbols_are_cuda_runtime() -> None:
    text = "undefined symbol: cudaGetDriverEntryPointByVersion, version libcudart.so.12"
    assert top(text)[0] == "cuda-runtime"


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(["3c10", "2at", "5torch", "6caffe2"]),
    st.from_regex(r"[0-9A-Za-z_]{0,40}", fullmatch=True),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200),
)
def test_property_torch_namespace_symbols_are_abi(ns: str, tail: str, noise: str) -> None:
    text = f"{noise}\nImportError: /x/ext.so: undefined symbol: _ZN{ns}{tail}\n{noise}"
    assert explain(text)[0].category == "abi-mismatch"


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=2_000))
def test_property_any_text_is_answered_or_not_without_error(text: str) -> None:
    for m in explain(text):
        assert 0 < m.confidence < 1 and m.remedies and m.category
        json.dumps(m.to_dict())


def test_wrapper_defers_to_the_real_cause_but_is_still_listed() -> None:
    text = (
        "ImportError: libcudart.so.13: cannot open shared object file: No such file or directory\n"
        "During handling of the above exception, another exception occurred:\n"
        "ImportError: Can not import FA3 in sgl_kernel. Please check your installation."
    )
    ms = explain(text)
    assert ms[0].category == "cuda-runtime" and "fa3.sgl-kernel-import" in [m.id for m in ms]
    assert ms[0].confidence > ms[1].confidence


def test_nothing_recognised_gives_no_match() -> None:
    assert explain("the weather is nice today") == []
    assert explain("") == [] and explain(ABI, limit=0) == []
    assert "fa-doctor check" in NO_MATCH


def test_limit_and_order() -> None:
    text = ABI + "\nNo module named 'flash_attn_2_cuda'\nFlashAttention only supports Ampere GPUs or newer."
    ms = explain(text, limit=2)
    assert len(ms) == 2 and ms[0].confidence >= ms[1].confidence


# ---------------------------------------------------------------------------------------------- extraction
def test_extracts_versions_arch_and_wheel() -> None:
    text = (
        "pip install flash_attn-2.7.4.post1+cu12torch2.4cxx11abiTRUE-cp310-cp310-linux_x86_64.whl\n"
        "torch 2.5.1+cu121, CUDA 12.1, python 3.10, GPU: NVIDIA A100 (sm_80)\n" + ABI
    )
    e = explain(text)[0].extracted
    assert e["wheel"] == "flash_attn-2.7.4.post1+cu12torch2.4cxx11abiTRUE-cp310-cp310-linux_x86_64.whl"
    assert e["cxx11abi"] == "TRUE" and e["torch"] == "2.5.1+cu121" and e["python"] == "3.10"
    assert e["cuda"] == "12.1" and e["flash_attn"] == "2.7.4.post1"


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt not installed")
def test_symbol_is_demangled() -> None:
    assert explain(ABI)[0].extracted["demangled"] == "c10::cuda::SetDevice(int)"


def test_extracts_glibc_module_fa_impl_ver_and_capability() -> None:
    glibc = "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by /x/flash_attn_2_cuda.so)"
    m = explain(glibc)[0]
    assert m.category == "glibc" and m.extracted["glibc_requires"] == "GLIBC_2.32"
    assert m.extracted["glibc_version"] == "2.32"
    m = explain("ModuleNotFoundError: No module named 'cutlass.cute'")[0]
    assert (m.category, m.extracted["module"]) == ("fa4-dsl", "cutlass.cute")
    m = explain("ValueError: Invalid version: self.fa_impl_ver=5")[0]
    assert (m.category, m.extracted["fa_impl_ver"]) == ("selection-override", "5")
    m = explain("FlashAttention2 requires compute capability >= 8, but found (7, 5).")[0]
    assert (m.category, m.extracted["capability"]) == ("arch-unsupported", "7.5")


def test_hostile_values_stay_data() -> None:
    text = "ValueError: Invalid version: self.fa_impl_ver=$(rm -rf ~)"
    m = explain(text)[0]
    assert m.extracted["fa_impl_ver"] == "$(rm"  # cut at whitespace, and only ever shown, never run
    assert all("rm -rf" not in c for r in m.remedies for c in remedy_lines(r))


# ---------------------------------------------------------------------------------------------- the Match type
def test_match_is_frozen_and_serialisable() -> None:
    m = explain(ABI)[0]
    with pytest.raises(FrozenInstanceError):
        m.id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        m.extracted["x"] = "y"  # type: ignore[index]
    doc = m.to_dict()
    assert json.loads(json.dumps(doc)) == doc
    assert set(doc) == {
        "id",
        "category",
        "title",
        "cause",
        "remedies",
        "confidence",
        "extracted",
        "confirm_with",
        "links",
        "reasons",
        "standing",
        "verdict",
        "verdict_reason",
    }
    assert "binary.undefined_symbol" in m.confirm_with and m.links
    assert m.reasons and m.verdict == ""  # no --python: the machine says nothing


# ---------------------------------------------------------------------------------------------- facts
def _facts(torch: str = "2.9.0+cu128", abi: bool = True, libc: str = "glibc 2.31") -> Facts:
    target = TargetFacts(
        "/srv/venv/bin/python",
        "/srv/venv/bin/python",
        (3, 11, 9),
        "cpython",
        "/srv/venv",
        (),
        "x86_64",
        libc,
        True,
        False,
    )
    gpus = GpuFacts("test", (GpuDevice(0, 0, "Tesla T4", (7, 5), 15360, None),), "535.0", "12.2", None, ())
    return Facts(
        target, gpus, TorchBuild(torch, "12.8", None, abi, "/srv/torch"), DistributionScan((), 0, ()), {}, None
    )


def test_facts_make_remedies_exact() -> None:
    generic = explain(ABI)[0].remedies
    exact = explain(ABI, facts=_facts())[0].remedies
    assert any("python -m pip" in c or "python -c" in c for r in generic for c in remedy_lines(r))
    assert "torch 2.9.0+cu128" in exact[0].text and "cxx11abiTRUE" in exact[0].text
    assert all("{python}" not in c for r in exact for c in remedy_lines(r))
    assert any("/srv/venv/bin/python" in c for r in exact for c in remedy_lines(r))
    glibc = "libc.so.6: version `GLIBC_2.32' not found (required by x.so)"
    assert "glibc 2.31" in explain(glibc, facts=_facts())[0].remedies[0].text
    arch = "RuntimeError: FlashAttention only supports Ampere GPUs or newer."
    assert "7.5" in explain(arch, facts=_facts())[0].remedies[0].text


# ---------------------------------------------------------------------------------------------- cost
def _adversarial() -> dict[str, str]:
    anchors = [p.find for e in load() for p in e.patterns if p.find]
    return {
        "one character": "a" * MAX_CHARS,
        "anchor soup": " ".join(anchors * (MAX_CHARS // sum(len(a) + 1 for a in anchors)))[:MAX_CHARS],
        "undefined symbols": ("undefined symbol: _Z" + "N" * 60 + "\n") * (MAX_CHARS // 82),
        "unterminated module": ("No module named '" + "x" * 300) * (MAX_CHARS // 317),
        "glibc digits": ("version `GLIBC_2." + "9" * 200) * (MAX_CHARS // 217),
        "prefixes": "> # " * (MAX_CHARS // 4),
        "unique lines": "\n".join(
            f"{anchors[i % len(anchors)]} {i} undefined symbol: _ZN3c10{i}" for i in range(25_000)
        ),
        "fullwidth": ("ｕｎｄｅｆｉｎｅｄ ｓｙｍｂｏｌ： " * 50_000)[:MAX_CHARS],
        "over the cap": ABI + "\n" + "y" * (3 * MAX_CHARS),
    }


@pytest.mark.parametrize("name", list(_adversarial()))
def test_megabyte_pastes_are_fast(name: str) -> None:
    text = _adversarial()[name]
    explain(text)  # warm up
    start = time.perf_counter()
    explain(text)
    # Typically 2-60 ms here; the bound is loose because CI machines are shared, but catastrophic backtracking
    # or an unbounded scan would take seconds.
    assert time.perf_counter() - start < 0.5
