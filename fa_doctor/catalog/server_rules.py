"""What a server release does with FlashAttention, answered from the generated tables in `servers.py` (explained
in docs/catalog.md). An installed SGLang the catalog does not hold gives the same `SglangRules`, `source="scan"`."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

PHASES = ("prefill", "decode")


@dataclass(frozen=True, slots=True)
class Refusal:
    """Something SGLang raises for an FA backend: at start-up (server_args, the registry) or at the first call."""

    where: str  # a phase ("prefill", "decode") or the flag that triggers it ("--decode-attention-backend")
    backend: str  # "fa3" | "fa4"
    models: str  # "any" | "mha" | "mla": the models it applies to (fa-doctor does not know the model)
    when: str  # "start-up" | "first-call"
    file: str
    error: str  # `Exception: message`, as the source writes it

    @classmethod
    def parse(cls, text: str) -> Refusal:
        head, _, error = text.partition(": ")
        where, backend, models, when, file = head.split(" ", 4)
        return cls(where, backend, models, when, file, error)

    @property
    def text(self) -> str:
        when = "at start-up" if self.when == "start-up" else "at its first call"
        return f"`{self.error}` {when} ({self.file})"


@dataclass(frozen=True, slots=True)
class Gate:
    """A GPU check beside a backend's construction: `majors` "8:mha" (8 for MHA models only), "9", ">=9"."""

    backend: str
    majors: tuple[str, ...]
    file: str
    error: str

    @classmethod
    def parse(cls, text: str) -> Gate:
        head, _, error = text.partition(": ")
        backend, majors, file = head.split(" ", 2)
        return cls(backend, tuple(majors.split(",")), file, error)

    def admits(self, major: int) -> str | None:
        """ "any" when every model may run on this major, "mha" when only MHA models may, None when none."""
        found = None
        for spec in self.majors:
            number, _, only = spec.partition(":")
            digits = number.lstrip("<>=")
            op = number[: len(number) - len(digits)]
            value = int(digits) if digits.isdigit() else -1
            ok = {"": major == value, ">=": major >= value, ">": major > value, "<=": major <= value,
                  "<": major < value}.get(op, False)  # fmt: skip
            if ok:
                found = "any" if not only or found == "any" else only
        return found


@dataclass(frozen=True, slots=True)
class DefaultRule:
    """One branch of SGLang's default-backend rule for MHA models: `backend` when every condition holds."""

    backend: str
    conditions: tuple[str, ...]  # hopper, sm100, blackwell, no-spec, fa3-arch, flashinfer, ... ("!" negates)

    @classmethod
    def parse(cls, text: str) -> DefaultRule:
        backend, _, conds = text.partition(" if ")
        return cls(backend, tuple(conds.split()))


# SGLang 0.5.23's rule, for an SGLang whose own rule could not be read from its files.
FALLBACK_DEFAULT = (
    DefaultRule("fa3", ("hopper", "no-spec")),
    DefaultRule("trtllm_mha", ("sm100", "no-spec")),
    DefaultRule("flashinfer", ("flashinfer",)),
    DefaultRule("triton", ()),
)


@dataclass(frozen=True, slots=True)
class SglangRules:
    version: str
    source: str  # "catalog": read from the released wheel; "scan": read from the installed files
    choices: frozenset[str]  # --attention-backend's choices (empty: not found)
    flags: tuple[str, ...]  # the backend flags it has
    backends: tuple[tuple[str, int], ...]  # backend name -> fa_impl_ver
    gates: tuple[Gate, ...]
    refusals: tuple[Refusal, ...]
    fa4: str  # the module fa_impl_ver=4 imports its kernels from; "sgl_kernel.flash_attn": the kernel's copy, ver=4
    fa4_switch: tuple[str, str, str] | None  # (variable, value, module it then imports instead)
    reads: frozenset[str]  # FA-related environment variables its code reads
    default: tuple[DefaultRule, ...]
    fa3_archs: tuple[str, ...]  # the architectures "fa3-arch" admits
    requires_python: str = ""
    kernel: str = ""  # its requirement line on sgl-kernel / sglang-kernel
    wheel: str = ""  # "<artifact> sha256=<sha256>" the rules were read from

    @classmethod
    def from_row(cls, version: str, row: Mapping[str, Any], source: str) -> SglangRules:
        switch = str(row.get("fa4_switch") or "")
        pair, _, module = switch.partition(" ")
        var, _, value = pair.partition("=")
        pairs = [item.partition("=") for item in str(row.get("backends") or "").split()]
        return cls(
            version=version,
            source=source,
            choices=frozenset(row.get("choices") or ()),
            flags=tuple(row.get("flags") or ()),
            backends=tuple((name, int(number)) for name, _, number in pairs if number.isdigit()),
            gates=tuple(Gate.parse(g) for g in row.get("gates") or ()),
            refusals=tuple(Refusal.parse(r) for r in row.get("refuse") or ()),
            fa4_switch=(var, value, module) if switch else None,
            reads=frozenset(row.get("reads") or ()),
            default=tuple(DefaultRule.parse(r) for r in row.get("default") or ()),
            fa3_archs=tuple(row.get("fa3_archs") or ()),
            **{k: str(row.get(k) or "") for k in ("fa4", "requires_python", "kernel", "wheel")},
        )

    @property
    def accepted(self) -> frozenset[int]:
        return frozenset(v for _, v in self.backends)

    def refusals_for(self, phase: str, backend: str, flag: str | None) -> tuple[Refusal, ...]:
        """Those for `backend` running `phase`, chosen by `flag` (None: SGLang's default or a pin)."""
        flagged = flag or "--attention-backend"
        hits = [r for r in self.refusals if r.where == (flagged if r.where.startswith("--") else phase)]
        return tuple(r for r in hits if r.backend == backend)

    def gate(self, backend: str) -> Gate | None:
        return next((g for g in self.gates if g.backend == backend), None)


@dataclass(frozen=True, slots=True)
class KernelRules:
    name: str  # sgl-kernel | sglang-kernel
    version: str
    fa4: str  # the module its FA4 copy is imported as ("" when it ships none)
    fa4_decode: str  # what flash_attn_with_kvcache(..., ver=4) raises ("" when it runs)
    wheel: str


@dataclass(frozen=True, slots=True)
class VllmRules:
    version: str
    env: str  # "VLLM_FLASH_ATTN_VERSION" when it reads the variable, else ""
    env_accepts: tuple[int, ...]  # the values its own assert takes (empty: no assert of its own)
    config: tuple[int, ...]  # --attention-config.flash_attn_version's values (empty: no such option)
    unsupported: Mapping[str, str]  # FA version -> the reason vLLM gives when it cannot run
    wheel: str

    def runs(self, version: int, major: int) -> bool | None:
        """Whether vLLM's support check passes FA `version` on this GPU major (None: it states no rule), read
        from its own reason text: "compute capability >= 8", "== 10", "9.x, 10.x, or 11.x", "9.0"."""
        reason = self.unsupported.get(str(version))
        if reason is None:
            return None
        text = reason.partition("compute capability")[2]
        found = re.search(r"(>=|==|<|>)\s*(\d+)", text)
        if found:
            op, value = found.group(1), int(found.group(2))
            # vLLM 0.7.x words FA2's rule as the failing condition ("< 8"): it runs on 8 and newer.
            return {">=": major >= value, "==": major == value, "<": major >= value, ">": major > value}[op]
        majors = {int(m) for m in re.findall(r"(\d+)\.[x\d]", text)}
        return major in majors if majors else None


def vllm_last_reading() -> str | None:
    """The newest vLLM release in the catalog that reads VLLM_FLASH_ATTN_VERSION."""
    return next((v for v, row in reversed(_servers().VLLM.items()) if row["env"]), None)


def vllm_newest() -> str | None:
    return next(reversed(_servers().VLLM), None)


def _servers() -> Any:
    from fa_doctor.catalog import servers  # 100 KB of tables: loaded on the first question

    return servers


def generated_on() -> str:
    return str(_servers().GENERATED_ON)


def _public(version: str) -> str:
    return version.split("+", 1)[0]


@lru_cache(maxsize=32)
def sglang(version: str) -> SglangRules | None:
    """The catalog's rules for an SGLang release, None when it does not hold it."""
    s = _servers()
    row = s.SGLANG.get(_public(version))
    if row is None:
        return None
    full = {**row, "choices": s.SGLANG_CHOICES[row["choices"]], **s.SGLANG_RULES[row["rules"]]}
    return SglangRules.from_row(version, full, "catalog")


def sglang_reading(variable: str) -> tuple[str, ...]:
    """The SGLang releases in the catalog whose code reads `variable`, oldest first."""
    s = _servers()
    return tuple(v for v, row in s.SGLANG.items() if variable in s.SGLANG_RULES[row["rules"]]["reads"])


def kernel(version: str) -> KernelRules | None:
    """The catalog's facts for an sgl-kernel / sglang-kernel release (the two names never share a version)."""
    for name, rows in _servers().KERNELS.items():
        row = rows.get(_public(version))
        if row is not None:
            return KernelRules(name, _public(version), row["fa4"], row["fa4_decode"], row["wheel"])
    return None


def vllm(version: str) -> VllmRules | None:
    row = _servers().VLLM.get(_public(version))
    if row is None:
        return None
    accepts, config = (tuple(int(v) for v in row[key].split() if v.isdigit()) for key in ("env_accepts", "config"))
    return VllmRules(_public(version), row["env"], accepts, config, row["unsupported"], row["wheel"])


# ---- printed installs, resolved when the catalog was generated -------------------------------------------------
def install_key(
    requirements: tuple[str, ...], options: tuple[str, ...], constraints: tuple[str, ...], python: str
) -> str:
    """The digest an install is recorded under: what pip is asked for, with which options and constraints, for
    which Python (major.minor)."""
    text = "\n".join([" ".join(sorted(requirements)), " ".join(options), " ".join(sorted(constraints)), python])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def _resolved() -> dict[str, tuple[str, str, str]]:
    return {key: (status, what, server) for server, rows in _servers().INSTALLS.items() for key, status, what in rows}


def install_status(key: str) -> tuple[str, str] | None:
    """(status, pip's reason) of a recorded install: "ok", or "no: <pip's reason>"; None when never resolved."""
    found = _resolved().get(key)
    return found[0].partition(": ")[::2] if found else None
