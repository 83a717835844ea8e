"""What the probes learn about the machine (GPUs, host, target interpreter, torch build): plain frozen data."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One GPU; ``physical_index`` is -1 when only torch saw it and the mapping is unknowable."""

    index: int
    physical_index: int
    name: str
    capability: tuple[int, int] | None  # None: not reported, or reported in a form that cannot be read
    memory_mib: int | None
    uuid: str | None
    # What the source said when it is not a plain "major.minor" ("9.0a", "[N/A]", ""); None when it was read.
    capability_raw: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self) | {"capability": f"{self.capability[0]}.{self.capability[1]}" if self.capability else None}


@dataclass(frozen=True, slots=True)
class GpuFacts:
    source: str
    devices: tuple[GpuDevice, ...]
    driver_version: str | None
    cuda_driver_version: str | None
    visible_devices: str | None
    attempts: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return asdict(self) | {"devices": [d.to_dict() for d in self.devices], "attempts": list(self.attempts)}


@dataclass(frozen=True, slots=True)
class HostFacts:
    name: str
    slurm_job_id: str | None = None
    slurm_node_id: str | None = None  # SLURM_NODEID: 0..N-1 within the job
    slurm_node_name: str | None = None
    k8s_node: str | None = None
    k8s_pod: str | None = None
    k8s_namespace: str | None = None
    k8s_index: str | None = None  # an indexed Job's completion index
    ray_node_id: str | None = None

    @property
    def scheduler_id(self) -> str | None:
        """The most specific id a scheduler gave this node, as `ray:…`, `k8s:…` or `slurm:…`; None outside one."""
        if self.ray_node_id:
            return f"ray:{self.ray_node_id}"
        if self.k8s_pod or self.k8s_node:
            return "k8s:" + "/".join(p for p in (self.k8s_namespace, self.k8s_pod or self.k8s_node) if p)
        if self.slurm_node_name or self.slurm_node_id:
            job = f"{self.slurm_job_id}/" if self.slurm_job_id else ""
            return f"slurm:{job}{self.slurm_node_name or self.slurm_node_id}"
        return None


@dataclass(frozen=True, slots=True)
class TargetFacts:
    python: str  # path as given (or fa-doctor's own interpreter)
    executable: str
    version: tuple[int, int, int]
    implementation: str
    prefix: str
    sys_path: tuple[str, ...]
    machine: str
    libc: str | None  # "glibc 2.36"
    in_venv: bool
    no_site: bool
    cwd: str | None = None  # the target's working directory; None when it was deleted

    def to_dict(self) -> dict[str, object]:
        keys = ("python", "executable", "version", "implementation", "prefix", "in_venv", "machine", "libc")
        out: dict[str, object] = {k: getattr(self, k) for k in keys}
        return out | {"version": ".".join(map(str, self.version)), "sys_path": list(self.sys_path)}


@dataclass(frozen=True, slots=True)
class TorchBuild:
    version: str | None
    cuda: str | None
    hip: str | None
    cxx11_abi: bool | None
    location: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
