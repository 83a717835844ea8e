"""scripts/regen_catalog.py's table builders, run on the corpus and the saved index listing (no network).

releases.py must be what the generator makes of the real artifacts: VERSIONS/YANKED from the saved listing,
REQUIRES/REQUIRES_PYTHON/SOURCES from every corpus file that is a catalog source, and the file itself byte for
byte from its own tables (regenerating on an unchanged index changes nothing).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import pypi_index  # noqa: E402
import regen_catalog as rc  # noqa: E402

from fa_doctor.catalog import releases  # noqa: E402

CORPUS = ROOT / "tests" / "corpus" / "metadata"
LISTING = json.loads((ROOT / "tests" / "corpus" / "index-listing.json").read_text(encoding="utf-8"))


def _tables() -> rc.Tables:
    return rc.Tables(
        generated_on=releases.GENERATED_ON,
        index=releases.INDEX,
        versions=releases.VERSIONS,
        yanked=releases.YANKED,
        requires=releases.REQUIRES,
        requires_python=releases.REQUIRES_PYTHON,
        sources=releases.SOURCES,
        torch_channels=releases.TORCH_CHANNELS,
        torch_channels_source=releases.TORCH_CHANNELS_SOURCE,
        fa2_wheels=releases.FA2_WHEELS,
        fa2_wheel_url=releases.FA2_WHEEL_URL,
        fa2_wheel_name=releases.FA2_WHEEL_NAME,
        fa2_wheels_source=releases.FA2_WHEELS_SOURCE,
    )


def test_render_gives_back_the_file_byte_for_byte() -> None:
    assert rc.render(_tables()) == rc.OUT.read_text(encoding="utf-8")


def test_render_does_not_depend_on_input_order() -> None:
    def rev(d: dict) -> dict:  # type: ignore[type-arg]
        return {k: rev(v) if isinstance(v, dict) else v for k, v in reversed(list(d.items()))}

    t = _tables()
    shuffled = dataclasses.replace(
        t, **{f.name: rev(getattr(t, f.name)) for f in dataclasses.fields(t) if isinstance(getattr(t, f.name), dict)}
    )
    assert rc.render(shuffled) == rc.render(t)


def test_versions_and_yanked_from_the_saved_listing() -> None:
    versions, yanked = rc.versions_tables(LISTING)
    assert versions == releases.VERSIONS
    assert yanked == releases.YANKED


def _corpus_file(name: str, artifact: str) -> Path | None:
    for p in (CORPUS / name / f"{artifact}.metadata", CORPUS / name / artifact / "PKG-INFO"):
        if p.is_file():
            return p
    return None


def test_requires_from_every_corpus_source() -> None:
    checked = 0
    for name, by_version in releases.SOURCES.items():
        for version, source in by_version.items():
            path = _corpus_file(name, source.split()[0])
            if path is None:
                continue
            data = path.read_bytes()
            assert rc.source_entry(source.split()[0], data) == source
            lines, requires_python = rc.requires_entry(data)
            assert releases.REQUIRES[name][version] == lines
            assert releases.REQUIRES_PYTHON[name][version] == requires_python
            checked += 1
    assert checked >= 250


def test_every_listed_version_of_the_read_packages_has_requirements() -> None:
    for name, minimum in rc.FA_STACK_READ.items():
        wanted = [v for v in releases.VERSIONS.get(name, ()) if rc._vkey(v) >= rc._vkey(minimum)]
        assert list(releases.REQUIRES[name]) == wanted, name
        assert list(releases.SOURCES[name]) == wanted, name


def test_sglang_0_5_23_real_metadata() -> None:
    data = (CORPUS / "sglang" / "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl.metadata").read_bytes()
    lines, requires_python = rc.requires_entry(data)
    assert "torch==2.14.1" in lines and "sglang-kernel==0.4.10" in lines
    assert requires_python == ">=3.11"


def test_facts_the_issue_names() -> None:
    # flash-attn-4 has pre-releases only, and one yanked placeholder
    assert releases.VERSIONS["flash-attn-4"] and all("b" in v for v in releases.VERSIONS["flash-attn-4"])
    assert releases.YANKED["flash-attn-4"] == ("0.0.1",)
    # the DSL split packages: libs-core and libs-cu12 exist from 4.6.0 on; 4.6.0.dev0 has neither
    assert releases.VERSIONS["nvidia-cutlass-dsl-libs-core"][0] == "4.6.0"
    assert releases.VERSIONS["nvidia-cutlass-dsl-libs-cu12"][0] == "4.6.0"
    assert "nvidia-cutlass-dsl-libs-cu12==4.8.1" in releases.REQUIRES["nvidia-cutlass-dsl"]["4.8.1"]
    assert 'nvidia-cutlass-dsl-libs-cu13==4.8.1; extra == "cu13"' in releases.REQUIRES["nvidia-cutlass-dsl"]["4.8.1"]
    assert releases.REQUIRES["flash-attn-4"]["4.0.0b26"][0] == "nvidia-cutlass-dsl==4.6.0.dev0"
    # cu129 is a torch channel of 2.9, 2.10 and 2.13
    for mm in ("2.9", "2.10", "2.13"):
        assert "cu129" in releases.TORCH_CHANNELS[mm]


def _f(filename: str, yanked: bool = False) -> pypi_index.IndexFile:
    return pypi_index.IndexFile("p", filename, "https://x/" + filename, "1.0", yanked, "", "", "", 1, "")


def test_pick_artifact() -> None:
    torch = [
        _f("torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl"),
        _f("torch-2.10.0-3-cp311-cp311-manylinux_2_28_x86_64.whl"),  # a build tag: pip prefers it
        _f("torch-2.10.0-cp311-cp311-manylinux_2_28_aarch64.whl"),
        _f("torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl"),
    ]
    assert pypi_index.pick_artifact(torch, "torch") == torch[1]
    assert pypi_index.pick_artifact(torch[2:3], "torch") is None  # no cp311 x86_64 wheel: not read
    files = [_f("p-1.0.tar.gz"), _f("p-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"), _f("p-1.0-py3-none-any.whl", True)]
    assert pypi_index.pick_artifact(files, "p") == files[1]  # the yanked pure wheel is passed over
    assert pypi_index.pick_artifact(files[:1], "p") == files[0]


def test_requirement_filter() -> None:
    assert rc.in_stack(rc.requirement_name("nvidia-cutlass-dsl-libs-cu13==4.8.1; extra == 'cu13'"))
    assert rc.in_stack(rc.requirement_name("Torch (==2.4.0) ; platform_system == 'Linux'"))
    assert not rc.in_stack(rc.requirement_name("orjson"))


PUBLISH_YML = """
jobs:
  setup_release:
    runs-on: ubuntu-latest
  build_wheels:
    strategy:
      matrix:
        os: [ubuntu-22.04, ubuntu-22.04-arm]
        python-version: ["3.10", "3.11"]
        torch-version: ["2.8.0", "2.9.1", "2.10.0.dev20251001"]
        cuda-version: ["12.9.1", "13.0.1"]
        cxx11_abi: ["FALSE", "TRUE"]
        exclude:
          - torch-version: "2.8.0"
            cuda-version: "13.0.1"
"""


def test_fa2_matrix() -> None:
    assert rc.fa2_matrix(yaml.safe_load(PUBLISH_YML)) == {
        "torch": ("2.8", "2.9", "2.10"),
        "cuda": ("12.9.1", "13.0.1"),
        "python": ("3.10", "3.11"),
        "cxx11abi": ("FALSE", "TRUE"),
        "platform": ("linux_x86_64", "linux_aarch64"),
        "exclude": ("cuda-version=13.0.1 torch-version=2.8",),
    }
    with pytest.raises(ValueError):
        rc.fa2_matrix({"jobs": {"x": {"runs-on": "y"}}})


SETUP_PY = """
PACKAGE_NAME = "pkg"
BASE_WHEEL_URL = (
    "https://example.invalid/download/{tag_name}/{wheel_name}"
)
def get_wheel_url():
    if IS_ROCM:
        wheel_filename = f"{PACKAGE_NAME}-{v}+rocm{h}-{py}.whl"
    else:
        wheel_filename = f"{PACKAGE_NAME}-{v}+cu{c}torch{t}-{py}.whl"
"""


def test_fa2_wheel_url() -> None:
    assert rc.fa2_wheel_url(SETUP_PY) == (
        "https://example.invalid/download/{tag_name}/{wheel_name}",
        "pkg-{v}+cu{c}torch{t}-{py}.whl",
    )
    assert releases.FA2_WHEEL_URL.format(tag_name="v2.8.3", wheel_name="w.whl").endswith("/v2.8.3/w.whl")


@pytest.mark.parametrize("text", ['extra == "cu13"', "it's", "both ' and \"", "back\\slash", "plain"])
def test_string_literals_round_trip(text: str) -> None:
    assert ast.literal_eval(rc._lit(text)) == text


# ---- servers.py: the per-release server facts and the recorded install resolutions ---------------------------------


def _servers() -> dict[str, object]:
    import server_facts

    from fa_doctor.catalog import servers

    return {
        "SGLANG": server_facts.expand(servers.SGLANG_CHOICES, servers.SGLANG_RULES, servers.SGLANG),
        "KERNELS": servers.KERNELS,
        "VLLM": servers.VLLM,
        "INSTALLS": servers.INSTALLS,
        "INSTALLS_SOURCE": servers.INSTALLS_SOURCE,
    }


def test_servers_render_gives_back_the_file_byte_for_byte() -> None:
    import server_facts

    from fa_doctor.catalog import servers

    assert servers.GENERATED_ON == releases.GENERATED_ON
    text = server_facts.render_servers(_servers(), servers.GENERATED_ON, rc.COMMAND)
    assert text == rc.SERVERS_OUT.read_text(encoding="utf-8")


def test_servers_cover_every_release_read() -> None:
    import server_facts

    from fa_doctor.catalog import servers

    sglang = [v for v in releases.VERSIONS["sglang"] if rc._vkey(v) >= rc._vkey(server_facts.SGLANG_FROM)]
    assert list(servers.SGLANG) == sglang and len(sglang) >= 71
    assert list(servers.VLLM) == [v for v in releases.VERSIONS["vllm"] if rc._vkey(v) >= rc._vkey("0.6.0")]
    for version, row in servers.SGLANG.items():
        wheel = row["wheel"].split()[0]
        assert wheel == releases.SOURCES["sglang"][version].split()[0]  # the artifact the metadata came from
        assert row["requires_python"] == releases.REQUIRES_PYTHON["sglang"][version]
        assert servers.INSTALLS[version], version  # every release had installs resolved
        assert all(status.split(":")[0] in ("ok", "no", "unchecked") for _, status, _ in servers.INSTALLS[version])


def test_an_install_pip_refused_is_never_printed() -> None:
    """sglang 0.4.6 pins sgl-kernel==0.0.9.post2, which no index has: the FA3 repair says so instead."""
    import resolve_installs

    from fa_doctor.diagnose.plan import recipes
    from fa_doctor.model.actions import PipInstall

    facts = resolve_installs._facts("0.4.6", "2.6.0", "3.10")
    (remedy,) = recipes.reinstall(facts, "fa3-sgl")
    assert not any(isinstance(a, PipInstall) for a in remedy.actions)
    assert "sgl-kernel==0.0.9.post2" in remedy.text and "pip's resolver found no consistent set" in remedy.text
    ok = resolve_installs._facts("0.5.9", "2.9.1", "3.10")
    (remedy,) = recipes.reinstall(ok, "fa3-sgl")
    assert remedy.actions[0].requirements == ("sgl-kernel==0.3.21",)  # type: ignore[attr-defined]
