"""Where a report ran: the host name, and the ids the scheduler that placed the run gives the node (Slurm's
variables, Kubernetes' downward-API ones inside a pod, FA_DOCTOR_RAY_NODE_ID from `fleet ray`; docs/fleet.md)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from fa_doctor.model.machine import HostFacts

RAY_NODE_VAR = "FA_DOCTOR_RAY_NODE_ID"
K8S_VARS = {"k8s_node": "NODE_NAME", "k8s_pod": "POD_NAME", "k8s_namespace": "POD_NAMESPACE"}
_MAX = 253  # a DNS name's length: nothing a scheduler names is longer; a longer value is cut


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value[:_MAX] or None


def probe(env: Mapping[str, str] | None = None, hostname: str | None = None) -> HostFacts:
    source = os.environ if env is None else env
    try:  # gethostname(2), without importing socket (~2 ms)
        name = hostname if hostname is not None else os.uname().nodename
    except OSError:
        name = ""
    in_pod = bool(source.get("KUBERNETES_SERVICE_HOST"))
    k8s = {field: (_get(source, var) if in_pod else None) for field, var in K8S_VARS.items()}
    return HostFacts(
        name=name[:_MAX] or "unknown",
        slurm_job_id=_get(source, "SLURM_JOB_ID"),
        slurm_node_id=_get(source, "SLURM_NODEID"),
        slurm_node_name=_get(source, "SLURMD_NODENAME"),
        k8s_index=_get(source, "JOB_COMPLETION_INDEX") if in_pod else None,
        ray_node_id=_get(source, RAY_NODE_VAR),
        **k8s,
    )
