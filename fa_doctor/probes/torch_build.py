"""How the target's torch was built, read from its files without importing it (which costs seconds and can crash
on the broken CUDA install being diagnosed): version.py with ``ast``, the C++ ABI from build artefacts."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Sequence

from fa_doctor.model.machine import TorchBuild
from fa_doctor.probes.files import open_regular, read

_FIELDS = ("__version__", "cuda", "hip")
_MAX_VERSION_PY = 1 << 20
_CMAKE_ABI = re.compile(rb"-D_GLIBCXX_USE_CXX11_ABI=([01])")
# Mangled names of the new-ABI std::string/list live in namespace std::__cxx11; the old ABI has none.
_CXX11_MARK = b"St7__cxx11"
_CHUNK = 1 << 20
_MAX_LIB = 256 << 20


def _find_torch(sys_path: Sequence[str]) -> str | None:
    for entry in sys_path:
        pkg = os.path.join(entry, "torch")
        if entry and os.path.isfile(os.path.join(pkg, "__init__.py")):  # "" is the caller's directory, not the target's
            return os.path.abspath(pkg)
    return None


def _version_fields(path: str) -> dict[str, str | None]:
    """Top-level ``name = 'str' | None`` (plain or annotated) assignments; last one wins, as on exec."""
    found: dict[str, str | None] = {}
    text = read(path, _MAX_VERSION_PY)
    try:
        tree = ast.parse(b"" if text.data is None or text.truncated else text.data, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return found
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        value = getattr(node, "value", None)
        if isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, str)):
            found.update({t.id: value.value for t in targets if isinstance(t, ast.Name) and t.id in _FIELDS})
    return found


def _cmake_abi(pkg: str) -> bool | None:
    data = read(os.path.join(pkg, "share", "cmake", "Torch", "TorchConfig.cmake"), _MAX_VERSION_PY).data
    m = _CMAKE_ABI.search(data) if data is not None else None
    return m.group(1) == b"1" if m else None


def _lib_abi(pkg: str) -> bool | None:
    tail = b""
    try:
        with open_regular(os.path.join(pkg, "lib", "libc10.so")) as f:
            for _ in range(_MAX_LIB // _CHUNK):
                if not (chunk := f.read(_CHUNK)):
                    return False
                # Keep a marker-sized overlap so a match split across two chunks is still seen.
                if _CXX11_MARK in tail + chunk:
                    return True
                tail = chunk[-(len(_CXX11_MARK) - 1) :]
    except OSError:
        return None
    return None  # larger than any libc10.so: not read to the end


def read_torch_build(sys_path: Sequence[str]) -> TorchBuild | None:
    """The first torch package on ``sys_path`` (the target's, in order), or None when there is none."""
    pkg = _find_torch(sys_path)
    if pkg is None:
        return None
    fields = _version_fields(os.path.join(pkg, "version.py"))
    # Older torch recorded the ABI flag in its CMake config; newer ones only in the binaries.
    abi = _cmake_abi(pkg)
    abi = _lib_abi(pkg) if abi is None else abi
    return TorchBuild(fields.get("__version__"), fields.get("cuda"), fields.get("hip"), abi, pkg)
