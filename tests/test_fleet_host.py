"""Every check and exec report says where it ran (`host`), with the scheduler's ids when one placed the run."""

from __future__ import annotations

import json
import socket

from clirun import invoke

from fa_doctor.model.machine import HostFacts
from fa_doctor.probes.environment import probe_host as probe

SLURM = {"SLURM_JOB_ID": "81234", "SLURM_NODEID": "3", "SLURMD_NODENAME": "gpu-a17"}
POD = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "NODE_NAME": "node-7", "POD_NAME": "fa-doctor-x2k9q"}


def test_plain_host() -> None:
    facts = probe({}, hostname="box")
    assert facts == HostFacts(name="box") and facts.scheduler_id is None
    assert probe({}).name == socket.gethostname()


def test_slurm_ids() -> None:
    facts = probe(SLURM, hostname="box")
    assert (facts.slurm_job_id, facts.slurm_node_id, facts.slurm_node_name) == ("81234", "3", "gpu-a17")
    assert facts.scheduler_id == "slurm:81234/gpu-a17"


def test_kubernetes_ids_only_inside_a_pod() -> None:
    inside = probe({**POD, "POD_NAMESPACE": "infer", "JOB_COMPLETION_INDEX": "5"}, hostname="fa-doctor-x2k9q")
    assert (inside.k8s_node, inside.k8s_pod, inside.k8s_namespace, inside.k8s_index) == (
        "node-7",
        "fa-doctor-x2k9q",
        "infer",
        "5",
    )
    assert inside.scheduler_id == "k8s:infer/fa-doctor-x2k9q"
    # NODE_NAME outside Kubernetes is someone else's variable.
    outside = probe({k: v for k, v in POD.items() if k != "KUBERNETES_SERVICE_HOST"}, hostname="box")
    assert outside.k8s_node is None and outside.k8s_pod is None


def test_ray_node_id_wins_and_values_are_bounded() -> None:
    facts = probe({**SLURM, "FA_DOCTOR_RAY_NODE_ID": "ab" * 28}, hostname="x" * 1000)
    assert facts.scheduler_id == "ray:" + "ab" * 28
    assert len(facts.name) == 253
    assert probe({"SLURM_JOB_ID": "  "}, hostname="").slurm_job_id is None
    assert probe({}, hostname="").name == "unknown"


def test_check_report_carries_host() -> None:
    env = {**SLURM, "FA_DOCTOR_RAY_NODE_ID": "f00d"}
    result = invoke(["check", "--no-smoke", "--json"], env=env)
    doc = json.loads(result.stdout)
    assert doc["host"]["name"] == socket.gethostname()
    assert doc["host"]["slurm_node_name"] == "gpu-a17" and doc["host"]["ray_node_id"] == "f00d"


def test_a_report_that_could_not_run_still_says_where() -> None:
    result = invoke(["check", "--python", "/nonexistent/python", "--json"], env=SLURM)
    doc = json.loads(result.stdout)
    assert result.exit_code == 2 and doc["error"] and doc["host"]["slurm_job_id"] == "81234"
