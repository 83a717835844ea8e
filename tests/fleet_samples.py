"""Generated node reports for the fleet tests and benchmarks/fleet_merge.py.

Each report starts from the golden `check` report (tests/golden/report.json, what the JSON renderer writes for a
fully filled result) and changes only what a fleet varies: where it ran, the GPUs, the FA version, the findings.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

TEMPLATE: dict[str, Any] = json.loads((Path(__file__).parent / "golden" / "report.json").read_text())

SMOKE_FAILED = {
    "id": "smoke.failed",
    "severity": "fail",
    "title": "FA4 kernel raised on GPU 3",
    "detail": "CUDA error: an illegal memory access was encountered",
    "evidence": {"gpu": 3},
    "remedies": [{"text": "Drain the node and run the GPU diagnostics.", "commands": ["nvidia-smi -q -d ECC"]}],
}
REQUIREMENT = {
    "id": "package.requirement",
    "severity": "fail",
    "title": "sglang-kernel 0.3.21 needs torch==2.9.1; torch 2.11.0 is installed",
    "detail": "",
    "evidence": {},
    "remedies": [
        {
            "text": "(2) Reinstall the torch sglang-kernel was built for.",
            "commands": ["/opt/venv/bin/python -m pip install torch==2.9.1"],
        }
    ],
}
KNOB_WARN = {
    "id": "knob.ignored",
    "severity": "warn",
    "title": "VLLM_FLASH_ATTN_VERSION is set but nothing reads it",
    "detail": "",
    "evidence": {},
    "remedies": [{"text": "Unset it.", "commands": ["unset VLLM_FLASH_ATTN_VERSION"]}],
}
OK_FINDINGS = [
    {"id": "gpu.found", "severity": "ok", "title": "8 GPU(s) visible", "detail": "", "evidence": {}, "remedies": []},
    {"id": "selection.ok", "severity": "ok", "title": "FA3 for prefill and decode", "evidence": {}, "remedies": []},
    {"id": "smoke.passed", "severity": "ok", "title": "FA kernels match", "evidence": {}, "remedies": []},
]


def report(
    name: str,
    *,
    findings: tuple[dict[str, Any], ...] = (),
    gpus: int = 8,
    fa: str = "4.0.0b36",
    driver: str = "580.159.04",
    ray: str | None = None,
    slurm_node: str | None = None,
    schema: str | None = None,
    host: bool = True,
    error: str | None = None,
) -> dict[str, Any]:
    doc = copy.deepcopy(TEMPLATE)
    device = doc["gpus"]["devices"][0]
    doc["gpus"]["devices"] = [
        {**device, "index": i, "physical_index": i, "uuid": f"GPU-{name}-{i}"} for i in range(gpus)
    ]
    doc["gpus"]["driver_version"] = driver
    doc["packages"][0]["version"] = fa
    doc["findings"] = [*OK_FINDINGS, *findings]
    worst = {f["severity"] for f in findings}
    doc["status"] = "fail" if "fail" in worst or error else "warn" if "warn" in worst else "ok"
    doc["exit_code"] = 2 if error else 1 if doc["status"] == "fail" else 0
    doc["error"] = error
    doc["summary"] = {s: sum(f["severity"] == s for f in doc["findings"]) for s in ("ok", "info", "warn", "fail")}
    if schema:
        doc["schema"] = schema
    doc["host"] = {
        "name": name,
        "slurm_job_id": "81234" if slurm_node else None,
        "slurm_node_id": None,
        "slurm_node_name": slurm_node,
        "k8s_node": None,
        "k8s_pod": None,
        "k8s_namespace": None,
        "k8s_index": None,
        "ray_node_id": ray,
    }
    if not host:
        del doc["host"]
    return doc


def write(folder: Path, docs: dict[str, dict[str, Any]]) -> Path:
    """One pretty-printed file per report, as `check --json > NAME.json` writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    for stem, doc in docs.items():
        (folder / f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
    return folder


def jsonl(docs: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(d) + "\n" for d in docs)
