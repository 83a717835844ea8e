"""Where a report ran: the host name, and the ids the scheduler that placed the run gives the node (Slurm's
variables, Kubernetes' downward-API ones inside a pod, FA_DOCTOR_RAY_NODE_ID from `fleet ray`; docs/fleet.md)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from fa_doctor.model.machine import HostFacts

RAY_NODE_VAR = "FA_DOCTOR_RAY_NODE_ID"
K8S_VARS = {"k8s_node": "NODE_NAME", "k8s_pod": "POD_NAME", "k8s_namespace": "POD_NAMESPACE"}
_POD_VARS = {**K8S_VARS, "k8s_index": "JOB_COMPLETION_INDEX"}  # read only inside a pod
_VARS = {"slurm_job_id": "SLURM_JOB_ID", "slurm_node_id": "SLURM_NODEID", "slurm_node_name": "SLURMD_NODENAME"}
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
    pod = _POD_VARS if source.get("KUBERNETES_SERVICE_HOST") else {}
    ids = {field: _get(source, var) for field, var in {**_VARS, "ray_node_id": RAY_NODE_VAR, **pod}.items()}
    return HostFacts(name[:_MAX] or "unknown", **ids)
