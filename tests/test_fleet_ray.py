"""`fa-doctor fleet ray` against a real local Ray cluster of three nodes (three raylets on this machine, started
with Ray's own test utilities, CPU only, on the loopback address), through the real CLI in a child process.

Every node has this machine's host name: the merged report must still list each node once, told apart by its
Ray node id. A node whose GPU a running server holds must be listed as unreachable, not waited on forever.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

if importlib.util.find_spec("ray") is None:
    pytest.skip("ray is not installed (pip install -e '.[test]' installs it)", allow_module_level=True)
# Read when ray is imported: without it Ray advertises the machine's interface address, even for nodes started
# on 127.0.0.1, and connects there. The test cluster stays on loopback; the CLI's children inherit this.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
import ray


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    started = time.perf_counter()
    nodes = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1"})
    try:
        nodes.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        # A GPU in Ray's books only (this machine has none): the check task asks for it, as on a GPU node.
        nodes.add_node(num_cpus=1, num_gpus=1, node_ip_address="127.0.0.1")
        nodes.wait_for_nodes()
        assert nodes.address.startswith("127.0.0.1:"), nodes.address
        sys.stderr.write(f"3-node Ray cluster up in {time.perf_counter() - started:.1f} s\n")
        yield nodes
    finally:
        nodes.shutdown()


def fleet(address: str, *args: str) -> tuple[int, dict[str, Any], str]:
    argv = [sys.executable, "-m", "fa_doctor", "fleet", "ray", "--address", address, "--no-smoke", "--json", *args]
    done = subprocess.run(argv, capture_output=True, timeout=180, check=False)
    return done.returncode, json.loads(done.stdout), done.stderr.decode(errors="replace")  # stdout: one document


def node_ids(address: str) -> dict[str, float]:
    ray.init(address=address, log_to_driver=False)
    try:
        return {n["NodeID"]: n["Resources"].get("GPU", 0) for n in ray.nodes() if n["Alive"]}
    finally:
        ray.shutdown()


def test_every_node_checked_once(cluster: Any) -> None:
    ids = node_ids(cluster.address)
    assert len(ids) == 3
    code, doc, err = fleet(cluster.address)
    assert doc["schema"] == "fa-doctor.fleet/1" and doc["engine"] == "ray" and doc["command"] == "fleet"
    assert doc["nodes"] == 3 and doc["unreachable"] == [] and doc["refused"] == [], err
    names = [n["node"] for n in doc["node_results"]]
    assert len(set(names)) == 3  # one host name, three nodes: told apart by the Ray node id
    assert sorted(n.rsplit(":", 1)[1].rstrip(")") for n in names) == sorted(i[:12] for i in ids)
    assert [n["source"] for n in doc["node_results"]] == [f"ray:{n.rsplit(':', 1)[1].rstrip(')')}" for n in names]
    assert len(doc["groups"]) == 1 and len(doc["groups"][0]["nodes"]) == 3  # one machine: one install
    assert code == doc["exit_code"] and code in (0, 1)


def test_a_node_whose_gpu_is_held_is_unreachable(cluster: Any) -> None:
    ray.init(address=cluster.address, log_to_driver=False)
    try:

        @ray.remote(num_gpus=1, num_cpus=0)
        class Server:  # a serving process holding the node's GPU
            def ready(self) -> bool:
                return True

        server = Server.remote()  # type: ignore[attr-defined]
        assert ray.get(server.ready.remote(), timeout=120)
        gpu_node = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU"))
        started = time.perf_counter()
        code, doc, err = fleet(cluster.address, "--node-timeout", "15")
        waited = time.perf_counter() - started
        ray.kill(server)
    finally:
        ray.shutdown()
    assert code == 1 and doc["nodes"] == 2, err
    (unreachable,) = doc["unreachable"]
    assert unreachable["node"].endswith(f"(ray:{gpu_node[:12]})") and "no report within 15 s" in unreachable["why"]
    assert any(v["id"] == "fleet.unreachable" for v in doc["verdict"])
    assert waited < 120  # the deadline holds: the task waiting for the GPU was cancelled


def test_no_cluster_is_a_clear_exit_2() -> None:
    code, doc, _ = fleet("127.0.0.1:1")  # nothing listens on port 1
    assert code == 2 and doc["error"].startswith("cannot connect to a Ray cluster at 127.0.0.1:1")
    assert doc["schema"] == "fa-doctor.fleet/1" and doc["nodes"] == 0
