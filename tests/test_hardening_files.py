"""Reading the target's files: FIFOs, devices and sockets are refused without blocking; sizes are bounded;
"missing" and "unreadable" stay apart. Each call runs under a watchdog so a regression fails, not hangs."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from fa_doctor.probes import files
from fa_doctor.probes.distributions import scan_distributions
from fa_doctor.probes.modules import _uses_extend_path, resolve
from fa_doctor.probes.torch_build import read_torch_build

T = TypeVar("T")
PY = (3, 11)
ROOT = os.getuid() == 0


def quick(call: Callable[[], T], seconds: float = 5.0) -> T:
    box: list[T] = []
    thread = threading.Thread(target=lambda: box.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked"  # a FIFO opened for reading blocks until a writer comes
    return box[0]


def special(path: Path, kind: str) -> None:
    """Put a FIFO, a socket, a device or a link to one at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        # Bound by its name from its own folder: a whole path under a pytest-xdist worker's tmp_path
        # (.../popen-gw0/test_.../) can pass the 108 bytes AF_UNIX takes.
        sock, here = socket.socket(socket.AF_UNIX), os.getcwd()
        os.chdir(path.parent)
        try:
            sock.bind(path.name)
        finally:
            os.chdir(here)
            sock.close()
    elif kind == "device":
        path.symlink_to("/dev/zero")  # endless: a reader without a limit would never finish
    elif kind == "stdin":
        path.symlink_to("/dev/stdin")
    elif kind == "fifo-link":
        os.mkfifo(path.with_name(path.name + ".fifo"))
        path.symlink_to(path.with_name(path.name + ".fifo"))


KINDS = ["fifo", "socket", "device", "stdin", "fifo-link"]


@pytest.mark.parametrize("kind", KINDS)
def test_read_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    special(tmp_path / "x", kind)
    got = quick(lambda: files.read(str(tmp_path / "x"), 1024))
    assert got.data is None and got.problem and "not a regular file" in got.problem
    assert not files.is_regular(str(tmp_path / "x"))


def test_read_bounds_the_size(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"a" * 5000)
    got = files.read(str(tmp_path / "big"), 100)
    assert got.data == b"a" * 100 and got.truncated
    assert files.read(str(tmp_path / "big"), 5000).truncated is False


def test_missing_and_unreadable_differ(tmp_path: Path) -> None:
    missing = files.read(str(tmp_path / "nope"), 10)
    assert missing.problem == "no such file"
    assert files.read(str(tmp_path / "nope" / "deeper"), 10).problem == "no such file"
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    looped = files.read(str(tmp_path / "loop"), 10)
    assert looped.problem is not None and looped.problem.startswith("unreadable")
    (tmp_path / "dir").mkdir()
    assert files.read(str(tmp_path / "dir"), 10).problem == "a directory, not a regular file"
    assert files.read("bad\0path", 10).problem == "no such file"


@pytest.mark.skipif(ROOT, reason="root reads a mode-000 file anyway")
def test_permission_denied_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("x")
    path.chmod(0)
    got = files.read(str(path), 10)
    assert got.problem == "unreadable: Permission denied"


@pytest.mark.parametrize("kind", KINDS)
def test_special_init_py_on_the_search_path(tmp_path: Path, kind: str) -> None:
    """The issue's hang: flash_attn/__init__.py as a FIFO (or a link to /dev/stdin), even in the cwd entry."""
    special(tmp_path / "flash_attn" / "__init__.py", kind)
    assert quick(lambda: _uses_extend_path(str(tmp_path / "flash_attn" / "__init__.py"))) is False
    # importlib takes only a regular __init__.py: the directory is a namespace portion, as Python sees it.
    spot = quick(lambda: resolve("flash_attn.cute", [str(tmp_path)], PY))
    assert spot.kind == "missing"
    assert quick(lambda: resolve("flash_attn", [str(tmp_path)], PY)).kind == "namespace"


def test_special_module_file_is_not_a_module(tmp_path: Path) -> None:
    special(tmp_path / "flash_attn_interface.py", "fifo")
    assert quick(lambda: resolve("flash_attn_interface", [str(tmp_path)], PY)).kind == "missing"


def test_regular_init_with_extend_path_still_extends(tmp_path: Path) -> None:
    (tmp_path / "a" / "flash_attn").mkdir(parents=True)
    (tmp_path / "a" / "flash_attn" / "__init__.py").write_text(
        "__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n"
    )
    (tmp_path / "b" / "flash_attn" / "cute").mkdir(parents=True)
    (tmp_path / "b" / "flash_attn" / "cute" / "__init__.py").write_text("")
    spot = resolve("flash_attn.cute", [str(tmp_path / "a"), str(tmp_path / "b")], PY)
    assert spot.kind == "package" and spot.origin == str(tmp_path / "b" / "flash_attn" / "cute" / "__init__.py")


def _dist(site: Path, name: str = "flash_attn", version: str = "2.8.3") -> Path:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    return info


@pytest.mark.parametrize("kind", KINDS)
def test_special_metadata_is_named_not_waited_on(tmp_path: Path, kind: str) -> None:
    info = _dist(tmp_path)
    special(info / "METADATA", kind)
    scan = quick(lambda: scan_distributions([str(tmp_path)]))
    (dist,) = scan.distributions
    assert dist.version == "?" and dist.problem is not None
    assert dist.problem.startswith("METADATA is a") and "not a regular file" in dist.problem


def test_unreadable_metadata_is_not_no_metadata(tmp_path: Path) -> None:
    info = _dist(tmp_path)
    (info / "METADATA").symlink_to(info / "METADATA")  # a loop: exists, cannot be read
    (dist,) = scan_distributions([str(tmp_path)]).distributions
    assert dist.problem is not None and dist.problem.startswith("METADATA is unreadable")
    info2 = _dist(tmp_path / "other")
    (dist2,) = scan_distributions([str(tmp_path / "other")]).distributions
    assert dist2.problem == "no METADATA file" and info2.exists()


@pytest.mark.parametrize("name", ["RECORD", "direct_url.json", "top_level.txt", "INSTALLER"])
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_special_side_files_are_skipped(tmp_path: Path, name: str, kind: str) -> None:
    info = _dist(tmp_path)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: flash_attn\nVersion: 2.8.3\n")
    special(info / name, kind)
    (dist,) = quick(lambda: scan_distributions([str(tmp_path)])).distributions
    assert dist.version == "2.8.3" and dist.problem is None
    if name == "RECORD":
        assert dist.files is None


@pytest.mark.parametrize("name", ["version.py", "share/cmake/Torch/TorchConfig.cmake", "lib/libc10.so"])
@pytest.mark.parametrize("kind", ["fifo", "device", "stdin"])
def test_special_torch_files(tmp_path: Path, name: str, kind: str) -> None:
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    if name != "version.py":
        (pkg / "version.py").write_text("__version__ = '2.9.1+cu128'\ncuda = '12.8'\n")
    special(pkg / name, kind)
    build = quick(lambda: read_torch_build([str(tmp_path)]))
    assert build is not None
    assert build.version == (None if name == "version.py" else "2.9.1+cu128")
    assert build.cxx11_abi is None
