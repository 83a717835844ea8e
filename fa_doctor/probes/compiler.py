"""The tools a source build needs, found where torch.utils.cpp_extension would look (nothing is run): nvcc under
`CUDA_HOME` (or `CUDA_PATH`), else on `PATH`, else in `/usr/local/cuda`; and git."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_nvcc(env: Mapping[str, str]) -> str | None:
    """The nvcc a source build in this environment would use, or None."""
    for name in ("CUDA_HOME", "CUDA_PATH"):
        home = env.get(name, "")
        if home and os.path.isabs(home):
            nvcc = os.path.join(home, "bin", "nvcc")
            return nvcc if _executable(nvcc) else None  # cpp_extension takes this toolkit, nvcc or not
    default = "/usr/local/cuda/bin/nvcc"
    return shutil.which("nvcc", path=env.get("PATH", "")) or (default if _executable(default) else None)


def find_git(env: Mapping[str, str]) -> str | None:
    return shutil.which("git", path=env.get("PATH", ""))
