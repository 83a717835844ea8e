"""Indexes and repositories that remedies point at."""

from __future__ import annotations

# CUDA builds of torch, one index per channel: https://download.pytorch.org/whl/cu128 ...
TORCH_INDEX = "https://download.pytorch.org/whl"
# CUDA 12 (`+cu129`) builds of sglang-kernel for releases whose PyPI wheels are CUDA 13 builds.
SGL_CU12_INDEX = "https://docs.sglang.ai/whl/cu129"
SGL_CU12_LOCAL = "cu129"  # the local version label of those builds: sglang-kernel==X+cu129
FLASH_ATTENTION_REPO = "https://github.com/Dao-AILab/flash-attention.git"


def torch_channel_index(channel: str) -> str:
    return f"{TORCH_INDEX}/{channel}"
