"""Every recipe in docs/fleet.md is validated: fa-doctor command lines parse with the real CLI, shell recipes
pass `bash -n` and ShellCheck, the Kubernetes manifest passes kubernetes-validate (the API's own schemas, from
PyPI) and has the shape the fleet needs, and the JSON example is a fleet document."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from markdown_it import MarkdownIt
from test_ci_docs import check_command_line, invocations, run, tool

from fa_doctor.probes.environment import K8S_VARS

DOC = Path(__file__).resolve().parent.parent / "docs" / "fleet.md"
MANIFEST = "kubernetes/fa-doctor-fleet.yaml"


def blocks() -> dict[str, str]:
    out: dict[str, str] = {}
    for token in MarkdownIt("commonmark").parse(DOC.read_text(encoding="utf-8")):
        if token.type == "fence" and token.info:
            _, _, name = token.info.partition(" ")
            assert name.strip() and name not in out, f"a block needs a unique file name: {token.info!r}"
            out[name.strip()] = token.content
    return out


BLOCKS = blocks()
SHELL = sorted(name for name in BLOCKS if name.endswith((".sh", ".sbatch")))


def _container() -> dict[str, Any]:
    doc = yaml.safe_load(BLOCKS[MANIFEST])
    (container,) = doc["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def test_the_recipes_are_there() -> None:
    assert SHELL == ["fleet-check.sbatch", "fleet-ray.sh", "kubernetes/collect.sh"]
    assert MANIFEST in BLOCKS and "fleet-ray-report.json" in BLOCKS


@pytest.mark.parametrize("name", [*SHELL, MANIFEST])
def test_fa_doctor_command_lines_parse(name: str) -> None:
    text = BLOCKS[name] if name != MANIFEST else _container()["command"][2].replace(";", "\n")
    found = list(invocations(text.replace('"$SLURM_JOB_NUM_NODES"', "16")))  # what Slurm puts there
    assert found, f"{name} runs no fa-doctor command"
    for args in found:
        check_command_line(args)


@pytest.mark.parametrize("name", SHELL)
def test_shell_recipe(name: str, tmp_path: Path) -> None:
    path = tmp_path / Path(name).name
    path.write_text(BLOCKS[name], encoding="utf-8")
    assert BLOCKS[name].startswith("#!/bin/bash\n")
    assert run("bash", "-n", str(path)).returncode == 0
    lint = run(tool("shellcheck"), "--shell=bash", "--severity=style", str(path))
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_the_jobs_shell_line(tmp_path: Path) -> None:
    command = _container()["command"]
    assert command[:2] == ["sh", "-c"]
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/sh\n" + command[2] + "\n")
    lint = run(tool("shellcheck"), "--shell=sh", "--severity=style", str(path))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    # A verdict (0 or 1) completes the pod; a check that could not run (2) fails it.
    for code, ok in ((0, True), (1, True), (2, False)):
        stub = tmp_path / "fa-doctor"
        stub.write_text(f"#!/bin/sh\necho '{{}}'\nexit {code}\n")
        stub.chmod(0o755)
        done = run("sh", "-c", f"PATH={tmp_path}:$PATH; {command[2]}")
        assert (done.returncode == 0) is ok, code


def test_kubernetes_manifest_validates(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(BLOCKS[MANIFEST], encoding="utf-8")
    result = run(tool("kubernetes-validate"), "--strict", "--no-warn", str(path))
    assert result.returncode == 0 and "passed" in result.stdout, result.stdout + result.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text(BLOCKS[MANIFEST].replace("completionMode:", "completionModes:"), encoding="utf-8")
    assert run(tool("kubernetes-validate"), "--strict", "--no-warn", str(broken)).returncode != 0  # it bites


def test_kubernetes_job_shape() -> None:
    doc = yaml.safe_load(BLOCKS[MANIFEST])
    spec = doc["spec"]
    assert (doc["apiVersion"], doc["kind"], spec["completionMode"]) == ("batch/v1", "Job", "Indexed")
    assert spec["completions"] == spec["parallelism"]
    pod = spec["template"]["spec"]
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"  # one pod per node
    assert term["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    container = _container()
    assert container["resources"]["limits"]["nvidia.com/gpu"] >= 1
    fields = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert fields == {
        K8S_VARS["k8s_node"]: "spec.nodeName",
        K8S_VARS["k8s_pod"]: "metadata.name",
        K8S_VARS["k8s_namespace"]: "metadata.namespace",
    }
    collect = BLOCKS["kubernetes/collect.sh"]
    assert f"--expect {spec['completions']}" in collect and "--tail=-1" in collect
    label = "app=" + spec["template"]["metadata"]["labels"]["app"]
    assert label in shlex.split(collect.replace("\\\n", " "), comments=True)


def test_slurm_recipe_merges_what_srun_wrote() -> None:
    text = BLOCKS["fleet-check.sbatch"]
    assert "#SBATCH --ntasks-per-node=1" in text and '--output="$reports/%N.json"' in text
    (check, merge) = list(invocations(text))
    assert check[:2] == ["check", "--require-gpu"] and "--json" in check
    assert merge[0] == "merge" and merge[-1] == "$reports" and "--expect" in merge


def test_the_json_example_is_a_fleet_document() -> None:
    doc = json.loads(BLOCKS["fleet-ray-report.json"])
    assert doc["schema"] == "fa-doctor.fleet/1" and doc["engine"] == "ray" and doc["nodes"] == 3
    assert len({n["node"] for n in doc["node_results"]}) == 3
    assert doc["groups"][0]["nodes"] == [n["node"] for n in doc["node_results"]]
