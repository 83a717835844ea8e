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
    pkgs = (os.path.join(entry, "torch") for entry in sys_path if entry)  # "" is the caller's folder, not the target's
    pkg = next((os.path.abspath(p) for p in pkgs if os.path.isfile(os.path.join(p, "__init__.py"))), None)
    if pkg is None:
        return None
    fields = _version_fields(os.path.join(pkg, "version.py"))
    # Older torch recorded the ABI flag in its CMake config; newer ones only in the binaries.
    cmake = read(os.path.join(pkg, "share", "cmake", "Torch", "TorchConfig.cmake"), _MAX_VERSION_PY).data
    m = _CMAKE_ABI.search(cmake) if cmake is not None else None
    abi = m.group(1) == b"1" if m else _lib_abi(pkg)
    return TorchBuild(fields.get("__version__"), fields.get("cuda"), fields.get("hip"), abi, pkg)
