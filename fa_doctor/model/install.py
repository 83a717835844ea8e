"""What the probes learn about an install (distributions, compiled extensions, module locations, SGLang's rules):
plain frozen data, made by fa_doctor/probes/; no I/O here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fa_doctor.catalog.families import normalize

if TYPE_CHECKING:
    from fa_doctor.catalog.server_rules import SglangRules


@dataclass(frozen=True, slots=True)
class Distribution:
    name: str
    normalized: str
    version: str
    location: str  # the search-path entry holding its metadata
    metadata_dir: str
    requires: tuple[str, ...] = ()
    top_level: tuple[str, ...] = ()
    files: tuple[str, ...] | None = None  # RECORD paths, relative to `location`; None when not read or absent
    installer: str | None = None
    editable_dir: str | None = None  # source tree of an editable install
    direct_url: str | None = None  # URL it was installed from (wheel file names carry the build tag)
    problem: str | None = None  # metadata unreadable

    def to_dict(self) -> dict[str, object]:
        keys = ("distribution", "version", "location", "metadata", "installer", "editable", "direct_url")
        names = ("name", "version", "location", "metadata_dir", "installer", "editable_dir", "direct_url")
        return {key: getattr(self, name) for key, name in zip(keys, names, strict=True)}


@dataclass(frozen=True, slots=True)
class DistributionScan:
    distributions: tuple[Distribution, ...]  # interesting ones, in search-path order
    total: int  # every distribution seen, interesting or not
    entries: tuple[str, ...]  # search-path directories scanned
    index: Mapping[str, str] = field(default_factory=dict)  # normalised name -> version, first on the path

    def named(self, *names: str) -> list[Distribution]:
        wanted = {normalize(n) for n in names}
        return [d for d in self.distributions if d.normalized in wanted]

    def first(self, *names: str) -> Distribution | None:
        return next(iter(self.named(*names)), None)


@dataclass(frozen=True, slots=True)
class Extension:
    impl: str  # implementation key: fa2, fa3, fa3-sgl, vllm-fa
    dist: str  # "<distribution> <version>"
    path: str
    relpath: str  # as RECORD names it, relative to the distribution's site directory


@dataclass(frozen=True, slots=True)
class ModuleSpot:
    name: str
    kind: str  # "package" | "module" | "extension" | "namespace" | "missing"
    origin: str | None  # file for modules/packages (__init__), first portion for namespaces
    search_locations: tuple[str, ...] = ()  # the package's __path__
    entry: str | None = None  # the sys.path entry it was found under
    note: str = ""

    @property
    def found(self) -> bool:
        return self.kind != "missing"

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "kind": self.kind, "origin": self.origin, "note": self.note}


@dataclass(frozen=True, slots=True)
class SglangFacts:
    version: str
    location: str
    accepted_versions: frozenset[int]  # fa_impl_ver values its backend names map to (fa3 -> 3, fa4 -> 4)
    fa4_module: str  # what the server imports for FA4
    fa4_vendored: bool  # FA4 from SGLang's own stack (its vendored copy, or sgl-kernel's copy), not flash-attn-4
    reads_override: bool  # does its code read SGLANG_FLASHATTENTION_VERSION
    has_fa3_kernel_toggle: bool  # SGLANG_USE_SGL_FA3_KERNEL exists in this version
    reads_inkling_pip: bool
    backend_found: bool
    backend_choices: frozenset[str] | None = None  # its --attention-backend choices; None: not found in its source
    # The release's rules: from fa-doctor's catalog (read from the released wheel), or read from the installed
    # files when the catalog does not hold this release or its files differ from the wheel's (`note` says why).
    rules: SglangRules | None = None
    fa4_from: str = ""  # where FA4's kernels come from, in words
    note: str = ""

    @property
    def source(self) -> str:
        return self.rules.source if self.rules else "scan"

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"version": self.version, "accepted_fa_versions": sorted(self.accepted_versions)}
        out |= {k: getattr(self, k) for k in ("fa4_module", "fa4_vendored", "fa4_from")}
        out["reads_SGLANG_FLASHATTENTION_VERSION"] = self.reads_override
        return out | {"rules_from": self.source, "note": self.note}
