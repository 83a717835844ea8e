"""Package findings against fake environments reached through --python."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import gpu_env
from fakeenv import H200, FakeEnv


def check(cli: Any, fenv: FakeEnv, *extra: str, env: dict[str, str] | None = None) -> Any:
    return cli("check", "--no-smoke", "--json", "--python", fenv.python, *extra, env=env)


def test_no_fa_at_all_is_package_none(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    run = check(cli, fenv)
    assert run.code == 1
    assert run.finding("package.none")["severity"] == "fail"
    assert run.finding("package.none")["remedies"]


def test_healthy_fa4_passes(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch()
    fenv.fa4()
    run = check(cli, fenv, env=gpu_env(tmp_path, H200))
    assert run.code == 0, run.stdout
    assert "package.broken" not in run.ids()
    pkgs = {p["distribution"]: p for p in run.doc["packages"]}
    assert pkgs["flash-attn-4"]["version"] == "4.0.0b36"
    assert pkgs["flash-attn-4"]["family"] == "fa4"
    assert run.doc["selection"]["fa_version"] == 4
    assert run.finding("selection.ok")["title"].startswith("FA4 will run")


def test_fa4_without_libs_core_is_broken(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4(core=False)
    run = check(cli, fenv)
    broken = run.finding("package.broken")
    assert "nvidia-cutlass-dsl-libs-core is not installed" in broken["detail"]
    cmds = " ".join(c for r in broken["remedies"] for c in r["commands"])
    assert "--force-reinstall --no-deps flash-attn-4==4.0.0b36" in cmds
    # DSL 4.8.1 requires libs-cu12 whatever the CUDA; [cu13] adds libs-cu13 (the released METADATA)
    assert (
        "nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu12==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1"
        in cmds
    )
    assert run.code == 1


def test_fa4_with_unprocessed_pth_is_broken(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4(pth=False)
    assert ".pth file was not processed" in check(cli, fenv).finding("package.broken")["detail"]


def test_fa2_and_fa4_owning_cute_conflict(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4()
    fenv.fa2("2.8.3", with_cute=True)
    run = check(cli, fenv)
    conflict = run.finding("package.conflict")
    assert set(conflict["evidence"]["distributions"]) == {"flash-attn 2.8.3", "flash-attn-4 4.0.0b36"}
    assert any(f.endswith("flash_attn/cute/__init__.py") for f in conflict["evidence"]["files"])
    assert conflict["remedies"][0]["commands"][-1].endswith("flash-attn-4==4.0.0b36")
    assert run.code == 1


def test_fa2_without_cute_coexists_with_fa4(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4()
    fenv.fa2("2.8.4", with_cute=False)
    assert "package.conflict" not in check(cli, fenv).ids()


def test_missing_record_file_is_broken(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4()
    (fenv.site / "flash_attn" / "cute" / "interface.py").unlink()
    detail = check(cli, fenv).finding("package.broken")["detail"]
    assert "flash_attn/cute/interface.py" in detail


def test_metadata_without_module_is_broken(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.dist("flash-attn", "2.8.3", {}, top_level=["flash_attn"])
    detail = check(cli, fenv).finding("package.broken")["detail"]
    assert "import flash_attn" in detail
    assert "flash_attn_2_cuda is missing" in detail


def test_fa2_without_compiled_extension_is_broken(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa2(native=False, with_cute=False)
    assert "flash_attn_2_cuda is missing" in check(cli, fenv).finding("package.broken")["detail"]


def test_source_checkout_in_cwd_shadows_install(cli: Any, fenv: FakeEnv, tmp_path: Path, monkeypatch: Any) -> None:
    fenv.torch()
    fenv.fa2(with_cute=False)
    checkout = tmp_path / "flash-attention"
    (checkout / "flash_attn").mkdir(parents=True)
    (checkout / "flash_attn" / "__init__.py").write_text("")
    monkeypatch.chdir(checkout)
    shadow = check(cli, fenv).finding("package.shadowed")
    assert shadow["evidence"]["resolves_to"] == str(checkout / "flash_attn" / "__init__.py")


def test_unowned_module_is_unmanaged(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4()
    (fenv.site / "flash_attn_interface.py").write_text("")
    assert check(cli, fenv).finding("package.unmanaged")["evidence"]["module"] == "flash_attn_interface"


def test_same_distribution_twice_is_duplicate(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch()
    fenv.fa4()
    extra = tmp_path / "user-site"
    fenv.dist("flash-attn-4", "4.0.0b20", {"flash_attn/cute/__init__.py": ""}, where=extra)
    run = check(cli, fenv, env={"PYTHONPATH": str(extra)})
    dup = run.finding("package.duplicate")
    assert dup["evidence"]["copies"][0].startswith("4.0.0b20")


def test_sglang_kernel_torch_pin_mismatch(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch("2.11.0+cu130")
    fenv.sgl_kernel(torch_pin="2.14.1")
    req = check(cli, fenv).finding("package.requirement")
    assert req["severity"] == "fail"
    assert "undefined symbol" in req["detail"]
    assert any("torch==2.14.1" in r["text"] for r in req["remedies"])
    # Only the alternative that says it replaces torch (and that fix --apply takes only when asked) moves it.
    moving = [r for r in req["remedies"] if any("install" in c and "torch==" in c for c in r["commands"])]
    assert moving and all(r["replaces_torch"] and "--allow-torch-change" in r["fix"] for r in moving)


def test_real_fixture_metadata_is_read(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fixture("sglang_kernel-0.4.10.dist-info")
    run = check(cli, fenv)
    pkgs = {p["distribution"]: p["version"] for p in run.doc["packages"]}
    assert pkgs["sglang-kernel"] == "0.4.10"
    assert "torch==2.14.1" in run.finding("package.requirement")["detail"]


def test_cute_dsl_installed_with_cu13_extra_is_not_a_requirement_problem(cli: Any, fenv: FakeEnv) -> None:
    """Seen on the H200: `nvidia-cutlass-dsl[cu13]` has libs-cu13 where the plain metapackage asks for libs-cu12."""
    fenv.torch()
    fenv.fa4()
    assert "package.requirement" not in check(cli, fenv).ids()


def test_cute_dsl_without_any_cuda_libs_is_broken(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.cutlass_dsl(cuda_libs=())
    fenv.fixture("flash_attn_4-4.0.0b36.dist-info")
    detail = check(cli, fenv).finding("package.broken")["detail"]
    assert "neither nvidia-cutlass-dsl-libs-cu12 nor -libs-cu13" in detail


def test_torch_missing(cli: Any, fenv: FakeEnv) -> None:
    fenv.fa4()
    run = check(cli, fenv)
    assert run.finding("torch.missing")["severity"] == "fail"
    assert run.code == 1


def test_torch_cpu_build_with_a_gpu_fails(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch("2.13.0+cpu", cuda=None)
    fenv.fa4()
    run = check(cli, fenv, env=gpu_env(tmp_path, H200))
    finding = run.finding("torch.cpu_build")
    assert finding["severity"] == "fail"
    assert finding["remedies"][0]["commands"][0].endswith(
        "--index-url https://download.pytorch.org/whl/cu126 torch==2.13.0+cu126"
    )
    assert "a guess" in finding["remedies"][0]["text"]  # nvidia-smi alone does not give the driver's CUDA version


def test_torch_cpu_build_without_gpu_is_info(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch("2.13.0+cpu", cuda=None)
    fenv.fa4()
    assert check(cli, fenv).finding("torch.cpu_build")["severity"] == "info"


def test_found_lists_each_family(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4()
    fenv.sgl_kernel(torch_pin="2.11.0")
    found = check(cli, fenv).finding("package.found")
    assert found["evidence"] == {"fa3-sgl": "sglang-kernel 0.4.10", "fa4": "flash-attn-4 4.0.0b36"}
