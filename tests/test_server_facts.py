"""Per-release server facts (fa_doctor/catalog/servers.py), checked against the released files themselves.

tests/fixtures/servers/<dist>-<version>/ holds verbatim excerpts of released wheels, each as `<path>.txt`
(SOURCE.json: the wheel, its sha256, and the lines of each file, with the file's sha256 from the wheel's RECORD).
The generator's readers run on them and must give the catalog's rows. test_server_rules_check.py runs `check` on
fake environments made of the real METADATA (the corpus) and these excerpts.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from fa_doctor.catalog import server_rules, servers
from fa_doctor.probes import sglang_rules

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import server_facts  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "servers"
WHEELS = Path(os.environ.get("FA_DOCTOR_WHEELS", "/tmp/fa-doctor-wheels"))  # where regen_catalog downloads them


def _source(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / name / "SOURCE.json").read_text(encoding="utf-8"))
    return doc


def _texts(name: str) -> dict[str, str]:
    folder = FIXTURES / name
    # Stored as `<path in the wheel>.txt`: released code, not ours to lint.
    return {str(p.relative_to(folder)).removesuffix(".txt"): p.read_text(encoding="utf-8")
            for p in folder.rglob("*.txt")}  # fmt: skip


# ---- provenance: every excerpt is of the wheel the catalog was read from ------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir()))
def test_every_excerpt_is_of_the_catalogs_wheel(name: str) -> None:
    dist, version = re.match(r"(.+?)-(\d.*)", name).groups()  # type: ignore[union-attr]
    table = {"sglang": servers.SGLANG, "vllm": servers.VLLM}.get(dist) or servers.KERNELS[dist]
    src = _source(name)
    assert table[version]["wheel"] == f"{src['wheel']} sha256={src['sha256']}"
    assert set(src["files"]) == set(_texts(name))


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir() if p.name.startswith("sglang-")))
def test_excerpts_are_the_wheels_lines(name: str) -> None:
    """With the downloaded wheel at hand (scripts/regen_catalog.py --wheels), each excerpt is its lines, verbatim."""
    import zipfile

    src = _source(name)
    wheel = WHEELS / src["wheel"]
    if not wheel.exists():
        pytest.skip(f"{wheel} not downloaded (python scripts/regen_catalog.py --wheels {WHEELS})")
    with zipfile.ZipFile(wheel) as zf:
        for path, spec in src["files"].items():
            lines = zf.read(path).decode().splitlines(keepends=True)
            want = "".join("".join(lines[a - 1 : b]) for a, b in spec["lines"])
            assert (FIXTURES / name / f"{path}.txt").read_text(encoding="utf-8") == want


# ---- the readers on the real code give the catalog's rows --------------------------------------------------------


@pytest.mark.parametrize("version", ["0.5.3", "0.5.5", "0.5.8", "0.5.9", "0.5.16"])
def test_the_reader_on_the_excerpts_agrees_with_the_catalog(version: str) -> None:
    row = sglang_rules.read_rules(_texts(f"sglang-{version}"))
    read = server_rules.SglangRules.from_row(version, row, "scan")
    catalog = server_rules.sglang(version)
    assert catalog is not None
    assert read.backends == catalog.backends == (("fa3", 3), ("fa4", 4))
    assert set(read.refusals) <= set(catalog.refusals)
    assert read.fa4 == catalog.fa4 and read.fa4_switch == catalog.fa4_switch
    assert set(read.gates) <= set(catalog.gates)


def test_0_5_8_compares_fa_impl_ver_with_4_but_takes_3_and_4() -> None:
    """`fa_impl_ver == 4` in 0.5.8's backend is a feature switch (num_splits), not a version check."""
    text = _texts("sglang-0.5.8")["sglang/srt/layers/attention/flashattention_backend.py"]
    assert "self.fa_impl_ver == 4" in text
    rules = server_rules.sglang("0.5.8")
    assert rules is not None and rules.accepted == {3, 4}
    assert [r for r in rules.refusals if r.models == "any"] == []  # nothing stops fa3 or fa4 for every model
    assert rules.fa4 == "sgl_kernel.flash_attn"


def test_0_5_4_to_0_5_7_refuse_fa4_for_decode_at_start_up() -> None:
    message = (
        "ValueError: FA4 backend is only supported for prefill. Please use `--prefill-attention-backend fa4` instead."
    )
    for version in servers.SGLANG:
        rules = server_rules.sglang(version)
        assert rules is not None
        flags = {r.where for r in rules.refusals if r.error == message}
        between = Version("0.5.4") <= Version(version) < Version("0.5.8")
        assert flags == ({"--attention-backend", "--decode-attention-backend"} if between else set()), version


def test_where_fa4_comes_from_per_release() -> None:
    fa4 = {v: server_rules.sglang(v).fa4 for v in servers.SGLANG}  # type: ignore[union-attr]
    kernel_route = [v for v, m in fa4.items() if m == "sgl_kernel.flash_attn"]
    assert kernel_route[0] == "0.5.3rc2" and kernel_route[-1] == "0.5.8.post1"
    assert fa4["0.5.9"] == "sglang.jit_kernel.flash_attention.cute"  # vendored: its backend imports the wrapper
    pip = [v for v, m in fa4.items() if m == "flash_attn.cute"]
    assert pip[0] == "0.5.10rc0" and pip[-1] == "0.5.15.post1"
    switch = [v for v in servers.SGLANG if server_rules.sglang(v).fa4_switch]  # type: ignore[union-attr]
    assert switch[0] == "0.5.16" and switch[-1] == "0.5.22"
    assert server_rules.sglang("0.5.23").fa4 == "sglang.kernels.ops.attention.flash_attn.cute"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("version", "module"), [("0.3.14.post1", "flash_attn.cute"), ("0.3.21", "flash_attn_origin.cute")]
)
def test_kernel_rows(version: str, module: str) -> None:
    texts = _texts(f"sgl-kernel-{version}")
    record = next(t for p, t in texts.items() if p.endswith("RECORD"))
    names = [line.split(",", 1)[0] for line in record.splitlines()]
    row = server_facts.kernel_row(names, texts)
    assert row["fa4"] == module == servers.KERNELS["sgl-kernel"][version]["fa4"]


@pytest.mark.parametrize(
    ("version", "env", "config"),
    [("0.14.1", "VLLM_FLASH_ATTN_VERSION", "2 3"), ("0.15.0", "", "2 3"), ("0.17.0", "", "2 3 4")],
)
def test_vllm_rows(version: str, env: str, config: str) -> None:
    row = server_facts.vllm_row(_texts(f"vllm-{version}"))
    assert (row["env"], row["config"]) == (env, config)
    catalog = servers.VLLM[version]
    assert (catalog["env"], catalog["config"], catalog["unsupported"]) == (env, config, row["unsupported"])


def test_the_check_tests_know_what_the_wheels_hold() -> None:
    """test_server_rules_check.py names each kernel's FA4 copy and 0.5.9's vendored package itself (it runs on the
    code of before issue 25 too): the catalog must say the same."""
    import test_server_rules_check as check

    for version, folder in check.KERNEL_COPY.items():
        assert servers.KERNELS["sgl-kernel"][version]["fa4"] == folder.replace("/", ".")
    for version, folder in check.VENDORED.items():
        assert server_rules.sglang(version).fa4 == folder.replace("/", ".")  # type: ignore[union-attr]
