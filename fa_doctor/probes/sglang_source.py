"""What the installed SGLang does with FlashAttention: the catalog's rules for its release, else (unknown release, or
edited files) those read from its source; and where FA4 comes from (can depend on the kernel package's version)."""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import replace

from fa_doctor.catalog import implementations, names, server_rules
from fa_doctor.catalog.server_rules import SglangRules
from fa_doctor.model.install import Distribution, DistributionScan, SglangFacts
from fa_doctor.probes import files, sglang_rules

BACKEND = sglang_rules.BACKEND_FILE
# Files checked against the installed RECORD before the catalog's rules are trusted (a patched image).
_CHECKED = (BACKEND, "sglang/srt/layers/attention/attention_registry.py", "sglang/srt/server_args.py")
# Where a vendored FA4 has lived (a fallback when the backend's import of it cannot be read).
_FA4_HOMES = (
    ("sglang/kernels/ops/attention/flash_attn/cute/interface.py", "sglang.kernels.ops.attention.flash_attn.cute"),
    ("sglang/jit_kernel/flash_attn/cute/interface.py", "sglang.jit_kernel.flash_attn.cute"),
)


def _text(path: str) -> str:
    return files.read(path, 4 << 20).text() or ""  # never blocks on a FIFO, bounded in size


def sources(root: str) -> dict[str, str]:
    """The installed source files the rules live in (sglang_rules.SOURCE_FILES), by their path in the wheel."""
    rels = list(sglang_rules.FIXED_FILES)
    walked = os.path.join(root, sglang_rules.ARG_GROUPS)
    for folder, dirs, names_ in os.walk(walked) if os.path.isdir(walked) else ():
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")[:50]
        rels += [os.path.relpath(os.path.join(folder, n), root).replace(os.sep, "/") for n in sorted(names_)[:200]]
    found = (rel for rel in rels if sglang_rules.SOURCE_FILES.match(rel))
    return {rel: _text(os.path.join(root, rel)) for rel in found if files.is_regular(os.path.join(root, rel))}


def _edited(dist: Distribution) -> list[str]:
    """The checked files whose content differs from the sha256 the installed RECORD gives for them."""
    record = _text(os.path.join(dist.metadata_dir, "RECORD"))
    wanted = {}
    for line in record.splitlines():
        path, _, rest = line.partition(",")
        if path in _CHECKED and rest.startswith("sha256="):
            wanted[path] = rest[len("sha256=") :].split(",", 1)[0]
    out = []
    for path, digest in wanted.items():
        data = files.read(os.path.join(dist.location, path), 8 << 20).data
        if data is not None and base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode() != digest:
            out.append(path)
    return out


def read_rules(dist: Distribution) -> tuple[SglangRules, str]:
    """(the rules, a note): the catalog's, unless it does not hold this release or the files were edited."""
    known = server_rules.sglang(dist.version)
    edited = _edited(dist) if known else []
    if known is not None and not edited:
        return known, ""
    row = sglang_rules.read_rules(sources(dist.location))
    if edited:
        note = (
            f"{', '.join(p.rsplit('/', 1)[-1] for p in edited)} differ from the released wheel's RECORD (edited "
            "after install), so its rules were read from the installed files, not taken from fa-doctor's catalog"
        )
    else:
        note = (
            f"fa-doctor's catalog (generated {server_rules.generated_on()}) does not hold SGLang {dist.version}: its "
            "rules were read from the installed source files only"
        )
    return SglangRules.from_row(dist.version, row, "scan"), note


def _fa4(rules: SglangRules, root: str, scan: DistributionScan | None) -> tuple[str, bool, str]:
    """(module, from SGLang's own stack, in words) for fa_impl_ver=4."""
    if 4 not in rules.accepted:
        return "flash_attn.cute", False, f"SGLang {rules.version} has no FA4 backend"
    if rules.fa4 == "sgl_kernel.flash_attn":
        kernel = scan.first(*names.SGL_KERNELS) if scan else None
        pinned = re.search(r"==\s*([^\s;,]+)", rules.kernel)
        facts = server_rules.kernel(kernel.version) if kernel else None
        facts = facts or (server_rules.kernel(pinned.group(1)) if pinned else None)
        module = facts.fa4 if facts and facts.fa4 else "flash_attn.cute"
        which = f"{kernel.name} {kernel.version}" if kernel else f"the kernel package ({rules.kernel or 'not pinned'})"
        text = (
            f"SGLang {rules.version} calls sgl_kernel.flash_attn(..., ver=4), which takes FA4 from the CuTe copy "
            f"inside {which} ({module}); the {names.FLASH_ATTN_4} package is not used"
        )
        return module, True, text
    if rules.fa4.startswith("sglang."):
        text = f"SGLang {rules.version}'s own vendored copy ({rules.fa4})"
        if rules.fa4_switch:
            var, value, other = rules.fa4_switch
            text += f"; with {var}={value} it imports {other} (the {names.FLASH_ATTN_4} package) instead"
        return rules.fa4, True, text
    if rules.fa4:
        return rules.fa4, False, f"SGLang {rules.version} imports {rules.fa4} from the {names.FLASH_ATTN_4} package"
    for marker, module in _FA4_HOMES:  # the wrapper's import could not be read: where a vendored copy would be
        if files.is_regular(os.path.join(root, marker)):
            return module, True, f"SGLang {rules.version}'s own vendored copy ({module})"
    fa4 = implementations.FA4.module
    return fa4, False, f"SGLang {rules.version} imports {fa4} (the {names.FLASH_ATTN_4} package)"


def read_sglang(dist: Distribution, override_name: str, scan: DistributionScan | None = None) -> SglangFacts:
    root = dist.location
    rules, note = read_rules(dist)
    backend_found = rules.source == "catalog" or files.is_regular(os.path.join(root, BACKEND))
    if rules.source == "scan" and not rules.backends and backend_found:
        # No registry could be read (it moved, or a trimmed install): FA3, and the versions FlashAttentionBackend
        # compares fa_impl_ver with (a fallback only: a comparison is not proof that a backend name maps to it).
        compared = re.findall(r"fa_impl_ver\s*==\s*(\d)", _text(os.path.join(root, BACKEND)))
        rules = replace(rules, backends=tuple((f"fa{v}", v) for v in sorted({3} | {int(v) for v in compared})))
    module, own, fa4_from = _fa4(rules, root, scan)
    switch = rules.fa4_switch
    return SglangFacts(
        version=dist.version,
        location=root,
        accepted_versions=rules.accepted or frozenset({3, 4}),
        fa4_module=module,
        fa4_vendored=own,
        reads_override=override_name in rules.reads,
        has_fa3_kernel_toggle="SGLANG_USE_SGL_FA3_KERNEL" in rules.reads,
        reads_inkling_pip=bool(switch and switch[0] == "SGLANG_INKLING_FA4_USE_PIP"),
        backend_found=backend_found,
        backend_choices=rules.choices or None,
        rules=rules,
        fa4_from=fa4_from,
        note=note,
    )
