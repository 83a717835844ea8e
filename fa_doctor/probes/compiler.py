"""The tools a source build needs, found where the build would look: the CUDA compiler and git.

A build of flash-attn or FA3 runs `torch.utils.cpp_extension`, which takes the CUDA toolkit from `CUDA_HOME` (or
`CUDA_PATH`), else from the folder above `nvcc` on `PATH`, else `/usr/local/cuda`; its compiler is `bin/nvcc` there.
Only whether the file is there and executable is asked: nothing is run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

_DEFAULT_CUDA = "/usr/local/cuda"


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_nvcc(env: Mapping[str, str]) -> str | None:
    """The nvcc a source build in this environment would use, or None."""
    for name in ("CUDA_HOME", "CUDA_PATH"):
        home = env.get(name, "")
        if home and os.path.isabs(home):
            nvcc = os.path.join(home, "bin", "nvcc")
            return nvcc if _executable(nvcc) else None  # cpp_extension takes this toolkit, nvcc or not
    found = shutil.which("nvcc", path=env.get("PATH", ""))
    if found:
        return found
    nvcc = os.path.join(_DEFAULT_CUDA, "bin", "nvcc")
    return nvcc if _executable(nvcc) else None


def find_git(env: Mapping[str, str]) -> str | None:
    return shutil.which("git", path=env.get("PATH", ""))
