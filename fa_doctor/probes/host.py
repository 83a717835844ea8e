"""Where a report ran: the host name, and what names the node to the scheduler that placed the run.

A fleet report (`fa-doctor merge`) lists nodes by host name; where names collide (Ray's test clusters run
every node on one machine; container hostnames repeat across clusters) the scheduler's own ids tell them apart.
Each id is read from the variables its scheduler sets, and only those:

- Slurm sets `SLURM_JOB_ID`, `SLURM_NODEID` (the node's index within the job) and `SLURMD_NODENAME` (the node's
  name as `scontrol show node` knows it) in every job step, and the job id and node name in a prolog.
- Kubernetes sets no node or pod variable by itself: the pod spec passes them with the downward API, under the
  names read here, `NODE_NAME` (`spec.nodeName`), `POD_NAME` (`metadata.name`) and `POD_NAMESPACE`
  (`metadata.namespace`) (docs/fleet.md has the manifest). They count only inside a pod, where the kubelet
  always sets `KUBERNETES_SERVICE_HOST`; an indexed Job's `JOB_COMPLETION_INDEX` is read too.
- Ray has no variable for the node id: `fa-doctor fleet ray` passes the id of the node it placed the check on
  as `FA_DOCTOR_RAY_NODE_ID`.
"""

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
    try:  # uname's node name is what gethostname(2) returns; the socket module costs ~2 ms to import
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
