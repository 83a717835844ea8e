"""A reused pass is keyed on what the import really loaded (issue 23): the real smoke child runs (torch on the
CPU, a fake flash_attn.cute that imports a real compiled extension), reports every module file and mapped
shared object, and a later check reruns the kernels when any of them, the search path's folders or the
environment changes, even where no RECORD lists the file and its mtime was put back."""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from fakeenv import FakeEnv, fake_nvidia_smi
from smoke_fakes.scenarios import FAKES, PYTHON, child_env

from fa_doctor.smoke import SmokeResult, SmokeTarget, runner

H200 = "0, GPU-5f1e2c3a-0000-4000-8000-000000000000, NVIDIA H200, 9.0, 143771"
REAL_RUN_SMOKE = runner.run_smoke
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a real extension")


def build(path: Path, source: str, python_module: bool) -> None:
    """Compile `source` into the shared object `path` (a Python extension module when asked)."""
    src = path.with_suffix(".c")
    src.write_text(source)
    include = ["-I", sysconfig.get_paths()["include"]] if python_module else []
    cmd = ["gcc", "-shared", "-fPIC", *include, "-o", str(path), str(src)]
    subprocess.run(cmd, check=True, timeout=60, capture_output=True)


EXTENSION = """#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_ext", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__ext(void) { return PyModule_Create(&def); }
/* VERSION */
"""


class Node:
    """A target venv the static check reads (tests/fakeenv.py) and the packages the real child imports."""

    def __init__(self, fenv: FakeEnv, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fenv, self.tmp, self.runs = fenv, tmp, 0
        self.pkgs = tmp / "pkgs"
        shutil.copytree(FAKES / "cute", self.pkgs)
        init = self.pkgs / "flash_attn" / "cute" / "__init__.py"
        init.write_text(init.read_text() + "\nfrom flash_attn.cute import _ext  # a real compiled extension\n")
        self.extension = self.pkgs / "flash_attn" / "cute" / f"_ext{SUFFIX}"
        build(self.extension, EXTENSION, True)
        self.child_extra: dict[str, str] = {}
        fenv.torch()
        fenv.fa4()
        monkeypatch.setenv("PATH", fake_nvidia_smi(tmp / "bin", (H200,))["PATH"])
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp / "cache"))
        monkeypatch.setattr(runner, "run_smoke", self.run)

    def run(self, python: str, target: SmokeTarget, **kw: Any) -> SmokeResult:
        self.runs += 1
        env = {**child_env(self.pkgs), **self.child_extra, **{k: v for k, v in (kw.get("env") or {}).items()
               if k in ("LD_PRELOAD", "PYTHONWARNINGS")}}  # fmt: skip
        kw.update(device="cpu", env=env, cache_dir=str(self.tmp / "cute-dsl"))
        return REAL_RUN_SMOKE(PYTHON, target, **kw)

    def check(self, cli: Any, env: dict[str, str] | None = None) -> dict[str, Any]:
        run = cli("check", "--json", "--python", self.fenv.python, env=env)
        assert run.code == 0, run.stdout[-2000:]
        smoke: dict[str, Any] = json.loads(run.stdout)["smoke"]
        return smoke


@pytest.fixture
def node(fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Node:
    return Node(fenv, tmp_path, monkeypatch)


def rewrite_keeping_mtime(path: Path, data: bytes) -> None:
    st = path.stat()
    path.write_bytes(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_the_child_reports_module_files_and_mapped_shared_objects(cli: Any, node: Node) -> None:
    first = node.check(cli)
    assert first["cached"] is False and node.runs == 1
    (verdict,) = (node.tmp / "cache" / "fa-doctor" / "verdicts").glob("*.json")
    watched = json.loads(verdict.read_text())["watch"]
    assert str(node.extension) in watched  # the extension module, mapped and imported
    assert any("libtorch" in p for p in watched) and any(p.endswith("torch/__init__.py") for p in watched)
    assert node.check(cli)["cached"] is True and node.runs == 1


def test_an_extension_rebuilt_in_place_with_its_mtime_restored_runs_again(cli: Any, node: Node) -> None:
    node.check(cli)
    st = node.extension.stat()
    build(node.extension, EXTENSION.replace("VERSION", "rebuilt"), True)
    os.utime(node.extension, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = node.check(cli)
    assert after["cached"] is False and node.runs == 2
    assert f"loaded:{node.extension}" in after["changed"]


def test_a_module_file_rewritten_with_its_mtime_restored_runs_again(cli: Any, node: Node) -> None:
    node.check(cli)
    init = node.pkgs / "flash_attn" / "cute" / "__init__.py"
    rewrite_keeping_mtime(init, init.read_bytes() + b"# edited\n")
    assert node.check(cli)["cached"] is False and node.runs == 2


def test_a_symlinked_module_pointed_elsewhere_runs_again(cli: Any, node: Node) -> None:
    common = node.tmp / "common"
    shutil.copytree(FAKES / "common", common)
    real = common / "fake_attention.py"
    v1, v2 = common / "v1.py", common / "v2.py"
    shutil.copy(real, v1)
    shutil.copy(real, v2)
    real.unlink()
    real.symlink_to(v1)
    node.child_extra["PYTHONPATH"] = f"{node.pkgs}{os.pathsep}{common}"
    node.check(cli)
    real.unlink()
    real.symlink_to(v2)
    assert node.check(cli)["cached"] is False and node.runs == 2


def test_a_preloaded_library_is_keyed_and_its_rebuild_runs_again(cli: Any, node: Node) -> None:
    lib = node.tmp / "libhook.so"
    build(lib, "int hook(void) { return 1; }\n", False)
    node.check(cli)
    preload = node.check(cli, env={"LD_PRELOAD": str(lib)})
    assert preload["cached"] is False and "env:LD_PRELOAD" in preload["changed"] and node.runs == 2
    assert node.check(cli, env={"LD_PRELOAD": str(lib)})["cached"] is True and node.runs == 2
    st = lib.stat()
    build(lib, "int hook(void) { return 2; }\n", False)
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = node.check(cli, env={"LD_PRELOAD": str(lib)})
    assert again["cached"] is False and f"loaded:{lib}" in again["changed"] and node.runs == 3


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("zz-hook.pth", "import os\n"),
        ("sitecustomize.py", "import os\n"),
        ("flash_attn_shadow", None),  # a stray folder on the search path
    ],
)
def test_a_new_file_on_the_search_path_runs_again(cli: Any, node: Node, name: str, text: str | None) -> None:
    node.check(cli)
    if text is None:
        (node.fenv.site / name).mkdir()
    else:
        (node.fenv.site / name).write_text(text)
    after = node.check(cli)
    assert after["cached"] is False and "path" in after["changed"] and node.runs == 2


def test_any_variable_is_keyed_but_the_terminal_is_not(cli: Any, node: Node) -> None:
    node.check(cli)
    assert node.check(cli, env={"COLUMNS": "33", "TERM": "dumb"})["cached"] is True and node.runs == 1
    lazy = node.check(cli, env={"CUDA_MODULE_LOADING": "EAGER"})
    assert lazy["cached"] is False and lazy["changed"] == ["env:CUDA_MODULE_LOADING"] and node.runs == 2
