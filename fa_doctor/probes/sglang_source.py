"""What the installed SGLang accepts, read from a handful of its source files (never imported)."""

from __future__ import annotations

import os
import re

from fa_doctor.model.install import Distribution, SglangFacts
from fa_doctor.probes import files

BACKEND = "sglang/srt/layers/attention/flashattention_backend.py"
# Where an env var read by SGLang would be declared or consulted.
_READERS = (
    "sglang/srt/environ.py",
    BACKEND,
    "sglang/srt/server_args.py",
    "sglang/srt/arg_groups/overrides.py",
    "sglang/srt/layers/attention/attention_registry.py",
)
# FA4's home moved over time (reference/fa-selection.md 1.2); newest first: (marker file, module, vendored).
_FA4_HOMES = (
    ("sglang/kernels/ops/attention/flash_attn/cute/interface.py", "sglang.kernels.ops.attention.flash_attn.cute", True),
    ("sglang/jit_kernel/flash_attn/cute/interface.py", "sglang.jit_kernel.flash_attn.cute", True),
)
_VERSION_TEST = re.compile(r"fa_impl_ver\s*==\s*(\d+)")
# argparse's `choices` for --attention-backend; the list moved out of server_args.py in 2026.
_CHOICES_FILES = ("sglang/srt/arg_groups/choices.py", "sglang/srt/server_args.py")
_CHOICES_START = re.compile(r"^ATTENTION_BACKEND_CHOICES\s*=\s*\[", re.MULTILINE)
_QUOTED = re.compile(r"""["']([A-Za-z0-9_.-]{1,64})["']""")


def _text(path: str) -> str:
    return files.read_text(path, 4 << 20) or ""  # never blocks on a FIFO, bounded in size


def backend_choices(text: str) -> frozenset[str] | None:
    """The names in `ATTENTION_BACKEND_CHOICES = [...]` of one source file, None when it has no such list."""
    start = _CHOICES_START.search(text)
    if start is None:
        return None
    names: set[str] = set()
    for line in text[start.end() : start.end() + 20_000].splitlines():
        code = line.split("#", 1)[0]
        names.update(_QUOTED.findall(code.split("]", 1)[0]))
        if "]" in code:
            return frozenset(names) or None
    return None  # no closing bracket nearby: not a list this can read


def read_sglang(dist: Distribution, override_name: str) -> SglangFacts:
    root = dist.location
    sources = {rel: _text(os.path.join(root, rel)) for rel in _READERS}
    backend = sources[BACKEND]
    versions = {int(v) for v in _VERSION_TEST.findall(backend)}
    if backend and not versions:
        versions = {3}  # before fa_impl_ver existed (mid-2025) the backend was FA3 only
    fa4_module, vendored = "flash_attn.cute", False
    for marker, module, is_vendored in _FA4_HOMES:
        if files.is_regular(os.path.join(root, marker)):
            fa4_module, vendored = module, is_vendored
            break
    fa4_wrapper = _text(os.path.join(root, "sglang/kernels/ops/attention/flash_attention_v4.py"))
    choices = None
    for rel in _CHOICES_FILES:
        choices = backend_choices(sources[rel] if rel in sources else _text(os.path.join(root, rel)))
        if choices is not None:
            break
    return SglangFacts(
        version=dist.version,
        location=root,
        accepted_versions=frozenset(versions or {3, 4}),
        fa4_module=fa4_module,
        fa4_vendored=vendored,
        reads_override=any(override_name in text for text in sources.values()),
        has_fa3_kernel_toggle="SGLANG_USE_SGL_FA3_KERNEL" in sources["sglang/srt/environ.py"],
        reads_inkling_pip="SGLANG_INKLING_FA4_USE_PIP" in fa4_wrapper,
        backend_found=bool(backend),
        backend_choices=choices,
    )
