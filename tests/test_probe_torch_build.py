from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

import pytest

from fa_doctor.model.machine import TorchBuild
from fa_doctor.probes.torch_build import read_torch_build

VENV_SITE = Path(sysconfig.get_paths()["purelib"])
REAL_TORCH = VENV_SITE / "torch"

CU130_VERSION_PY = """from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = '2.11.0+cu130'
debug = False
cuda: Optional[str] = '13.0'
git_version = '0123456789abcdef'
hip: Optional[str] = None
rocm: Optional[str] = None
xpu: Optional[str] = None
"""


def fake_torch(
    root: Path,
    version_py: str | bytes | None = CU130_VERSION_PY,
    cmake: str | None = None,
    libc10: bytes | None = None,
) -> Path:
    pkg = root / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('the probe must never import torch')\n")
    if isinstance(version_py, bytes):
        (pkg / "version.py").write_bytes(version_py)
    elif version_py is not None:
        (pkg / "version.py").write_text(version_py)
    if cmake is not None:
        (pkg / "share" / "cmake" / "Torch").mkdir(parents=True)
        (pkg / "share" / "cmake" / "Torch" / "TorchConfig.cmake").write_text(cmake)
    if libc10 is not None:
        (pkg / "lib").mkdir()
        (pkg / "lib" / "libc10.so").write_bytes(libc10)
    return pkg


@pytest.mark.skipif(not (REAL_TORCH / "version.py").is_file(), reason="needs the venv's CPU torch")
def test_real_cpu_torch_in_venv() -> None:
    before = set(sys.modules)
    build = read_torch_build(sys.path)
    assert build is not None
    assert build.location == str(REAL_TORCH)
    assert build.version is not None and build.version.endswith("+cpu")
    assert build.cuda is None
    assert build.hip is None
    assert build.cxx11_abi is True
    assert "torch" not in set(sys.modules) - before  # its cost is benchmarks/static_stack.py's to measure


def test_cu130_build_with_new_abi_lib(tmp_path: Path) -> None:
    lib = b"\x7fELF" + b"\0" * 5000 + b"_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE" + b"\0" * 100
    pkg = fake_torch(tmp_path / "site", libc10=lib)
    build = read_torch_build([str(tmp_path / "site")])
    assert build == TorchBuild(version="2.11.0+cu130", cuda="13.0", hip=None, cxx11_abi=True, location=str(pkg))


def test_old_torch_cmake_abi0_wins_over_lib(tmp_path: Path) -> None:
    cmake = 'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")\n'
    fake_torch(tmp_path, version_py="__version__ = '1.13.1+cu117'\ncuda = '11.7'\nhip = None\n", cmake=cmake,
               libc10=b"St7__cxx11")  # fmt: skip
    build = read_torch_build([str(tmp_path)])
    assert build is not None
    assert (build.version, build.cuda, build.cxx11_abi) == ("1.13.1+cu117", "11.7", False)


def test_cmake_abi1(tmp_path: Path) -> None:
    fake_torch(tmp_path, cmake='set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=1")\n')
    build = read_torch_build([str(tmp_path)])
    assert build is not None and build.cxx11_abi is True


def test_cmake_without_flag_falls_back_to_lib_without_marker(tmp_path: Path) -> None:
    # A readable lib with no std::__cxx11 symbols means the old ABI.
    fake_torch(tmp_path, cmake="# nothing here\n", libc10=b"\x7fELF" + b"_ZNSs4_Rep" * 300_000)
    build = read_torch_build([str(tmp_path)])
    assert build is not None and build.cxx11_abi is False


def test_marker_split_across_read_chunks_is_found(tmp_path: Path) -> None:
    chunk = 1 << 20
    lib = b"\0" * (chunk - 4) + b"St7__cxx11" + b"\0" * 10
    fake_torch(tmp_path, libc10=lib)
    build = read_torch_build([str(tmp_path)])
    assert build is not None and build.cxx11_abi is True


def test_missing_lib_and_cmake_means_unknown_abi(tmp_path: Path) -> None:
    fake_torch(tmp_path)
    build = read_torch_build([str(tmp_path)])
    assert build is not None and build.cxx11_abi is None


@pytest.mark.parametrize(
    "version_py",
    [
        "def broken(:\n",
        b"__version__ = '2.0'\0\n",
        b"\xff\xfe garbage \x00\x01",
        "__version__ = 2.4\ncuda = f'{x}'\nhip = some_call()\n",
        "",
        "(" * 500_000,
    ],
)
def test_garbage_version_py_gives_none_fields(tmp_path: Path, version_py: str | bytes) -> None:
    pkg = fake_torch(tmp_path, version_py=version_py)
    build = read_torch_build([str(tmp_path)])
    assert build == TorchBuild(version=None, cuda=None, hip=None, cxx11_abi=None, location=str(pkg))


def test_missing_version_py(tmp_path: Path) -> None:
    fake_torch(tmp_path, version_py=None)
    build = read_torch_build([str(tmp_path)])
    assert build is not None and (build.version, build.cuda, build.hip) == (None, None, None)


def test_version_py_is_parsed_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    src = f"open({str(marker)!r}, 'w').close()\n__version__ = '2.9.0+rocm6.3'\nhip = '6.3.42131'\ncuda = None\n"
    fake_torch(tmp_path / "site", version_py=src)
    build = read_torch_build([str(tmp_path / "site")])
    assert build is not None and (build.version, build.cuda, build.hip) == ("2.9.0+rocm6.3", None, "6.3.42131")
    assert not marker.exists()


def test_last_top_level_assignment_wins_and_nested_ones_are_ignored(tmp_path: Path) -> None:
    src = "__version__ = '1.0'\n__version__ = '2.0'\nif True:\n    cuda = '99.9'\ndef f():\n    hip = 'x'\n"
    fake_torch(tmp_path, version_py=src)
    build = read_torch_build([str(tmp_path)])
    assert build is not None and (build.version, build.cuda, build.hip) == ("2.0", None, None)


def test_first_sys_path_entry_wins_and_odd_entries_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    (tmp_path / "no-init" / "torch").mkdir(parents=True)
    first = fake_torch(tmp_path / "first", version_py="__version__ = '2.13.0+cu130'\n")
    fake_torch(tmp_path / "second", version_py="__version__ = '2.0.0'\n")
    path = ["", str(tmp_path / "missing"), str(tmp_path / "a-file"), str(tmp_path / "no-init"),
            str(tmp_path / "first"), str(tmp_path / "second")]  # fmt: skip
    build = read_torch_build(path)
    assert build is not None and build.location == str(first) and build.version == "2.13.0+cu130"


def test_no_torch_anywhere(tmp_path: Path) -> None:
    assert read_torch_build([]) is None
    assert read_torch_build(["", str(tmp_path), str(tmp_path / "nope")]) is None


def test_to_dict_is_json_ready(tmp_path: Path) -> None:
    pkg = fake_torch(tmp_path, libc10=b"St7__cxx11")
    build = read_torch_build([str(tmp_path)])
    assert build is not None
    assert json.loads(json.dumps(build.to_dict())) == {
        "version": "2.11.0+cu130",
        "cuda": "13.0",
        "hip": None,
        "cxx11_abi": True,
        "location": str(pkg),
    }
