"""One published JSON Schema (fa_doctor/schema/report.schema.json, copied to docs/) for every --json document.

Real outputs of every command, in many scenarios (the fake environments of tests/fakeenv.py, the real smoke
harness with the fakes of tests/smoke_fakes), validate against it; every key it describes is emitted by one of
them (so the schema describes what render/json.py writes, no more and no less); every key has a description.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeenv import H200, FakeEnv, fake_nvidia_smi, make_env
from fleet_samples import REQUIREMENT, report, write
from jsonschema import Draft202012Validator, validators
from smoke_fakes.scenarios import FAKES, PYTHON, child_env

from fa_doctor.model.actions import KINDS
from fa_doctor.smoke import SmokeResult, SmokeTarget, runner

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_FILE = ROOT / "fa_doctor" / "schema" / "report.schema.json"
DOCS_COPY = ROOT / "docs" / "report.schema.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
REAL_RUN_SMOKE = runner.run_smoke

# (JSON pointer of a `properties` object, key) -> seen in a document that validated there
_seen: set[tuple[str, str]] = set()
_documents: list[tuple[str, dict[str, Any]]] = []


def _pointers(node: Any, where: str, out: dict[int, str]) -> dict[int, str]:
    """id() of every `properties` object in the schema -> its JSON pointer (`if` conditions left out)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "if":
                continue
            if key == "properties" and isinstance(value, dict):
                out[id(value)] = f"{where}/properties"
            _pointers(value, f"{where}/{key}", out)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _pointers(value, f"{where}/{i}", out)
    return out


POINTERS = _pointers(SCHEMA, "#", {})
_plain_properties = Draft202012Validator.VALIDATORS["properties"]


def _recording_properties(validator: Any, properties: Any, instance: Any, schema: Any) -> Iterator[Any]:
    where = POINTERS.get(id(properties))
    kind = properties.get("kind", {}).get("const") if isinstance(properties, dict) else None
    if where and isinstance(instance, dict) and (kind is None or instance.get("kind") == kind):
        _seen.update((where, key) for key in instance if key in properties)
    yield from _plain_properties(validator, properties, instance, schema)


Recording = validators.extend(Draft202012Validator, {"properties": _recording_properties})


def valid(text: str, label: str) -> dict[str, Any]:
    """The one JSON document in `text`, validated against the schema (every error listed)."""
    doc: dict[str, Any] = json.loads(text)
    errors = [f"{e.json_path}: {e.message[:300]}" for e in Recording(SCHEMA).iter_errors(doc)]
    assert not errors, (label, errors[:10])
    _documents.append((label, doc))
    return doc


# ---- the schema itself ---------------------------------------------------------------------------------


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(SCHEMA)


def test_docs_carry_the_same_schema() -> None:
    assert DOCS_COPY.read_bytes() == SCHEMA_FILE.read_bytes(), "cp fa_doctor/schema/report.schema.json docs/"


def test_every_key_has_a_description() -> None:
    missing: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for key, value in (node.get("properties") or {}).items():
                if "if" not in where.split("/") and not (isinstance(value, dict) and value.get("description")):
                    missing.append(f"{where}/properties/{key}")
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}/{i}")

    walk(SCHEMA, "#")
    assert not missing, "\n".join(missing)


def test_each_action_kind_is_described_field_for_field() -> None:
    variants = {v["properties"]["kind"]["const"]: set(v["properties"]) for v in SCHEMA["$defs"]["Action"]["oneOf"]}
    actual = {kind: {"kind", *(f.name for f in dataclasses.fields(cls))} for cls, kind in KINDS.items()}
    assert variants == actual


def test_the_package_ships_the_schema() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"schema/report.schema.json"' in text


# ---- real documents of every command -------------------------------------------------------------------


def fa_doctor(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fa_doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def stack(fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4()
    fenv.sgl_kernel()
    fenv.sglang()


def test_check_documents(cli: Any, fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = valid(cli("check", "--no-smoke", "--json", "--python", fenv.python).stdout, "check, empty venv")
    assert empty["torch"] is None and empty["smoke"] is None
    stack(fenv)
    valid(cli("check", "--no-smoke", "--json", "-v", "--python", fenv.python).stdout, "check, sglang stack")
    monkeypatch.setenv("SGLANG_FLASHATTENTION_VERSION", "5")
    bad = cli("check", "--no-smoke", "--json", "--strict", "--gpu-arch", "sm_90", "--python", fenv.python)
    doc = valid(bad.stdout, "check, invalid override")
    assert doc["status"] == "fail" and any(r["actions"] for f in doc["findings"] for r in f["remedies"])
    broken_fa3 = make_env(tmp_path / "fa3")
    broken_fa3.torch()
    broken_fa3.dist(
        "flash-attn-3",
        "3.0.0b1",
        {"flash_attn_interface.py": "", "flash_attn_3/__init__.py": ""},
        top_level=["flash_attn_interface", "flash_attn_3"],
        extra_record=["flash_attn_3/_C.abi3.so,sha256=AAAA,10"],  # listed, not there: a broken install
    )
    doc = valid(cli("check", "--no-smoke", "--json", "--python", broken_fa3.python).stdout, "check, broken FA3")
    assert "build-from-clone" in [a["kind"] for f in doc["findings"] for r in f["remedies"] for a in r["actions"]]
    missing = cli("check", "--json", "--python", str(tmp_path / "no-such-python"))
    assert valid(missing.stdout, "check, no interpreter")["error"]


def _harness(root: Path, tmp_path: Path) -> Any:
    def run(python: str, target: SmokeTarget, **kw: Any) -> SmokeResult:
        kw.update(device="cpu", env=child_env(root), cache_dir=str(tmp_path / "cute-dsl"))
        return REAL_RUN_SMOKE(PYTHON, target, **kw)

    return run


def test_smoke_documents(cli: Any, fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real smoke child (CPU torch, the fake FA4): a pass, the verdict reused, an import that fails."""
    fenv.torch()
    fenv.fa4()
    monkeypatch.setenv("PATH", fake_nvidia_smi(tmp_path / "bin", [H200])["PATH"])
    monkeypatch.setattr(runner, "run_smoke", _harness(FAKES / "cute", tmp_path))
    first = valid(cli("check", "--json", "--python", fenv.python).stdout, "check, smoke passed")
    assert first["smoke"]["results"][0]["status"] == "passed"
    again = valid(cli("check", "--json", "--python", fenv.python).stdout, "check, verdict reused")
    assert again["smoke"]["cached"] is True and again["smoke"]["proven"]
    monkeypatch.setattr(runner, "run_smoke", _harness(FAKES / "nocutlass", tmp_path))
    broken = valid(cli("check", "--json", "--fresh", "--python", fenv.python).stdout, "check, import failed")
    assert broken["smoke"]["results"][0]["error"]["cause"]


def test_exec_documents(fenv: FakeEnv, tmp_path: Path) -> None:
    stack(fenv)
    bad = {"SGLANG_FLASHATTENTION_VERSION": "5"}
    refused = fa_doctor("exec", "--json", "--no-smoke", "--python", fenv.python, "--", "true", env=bad)
    assert refused.returncode == 1 and refused.stdout == ""
    valid(refused.stderr, "exec, refused")
    usage = fa_doctor("exec", "--json", "--", "")
    assert usage.returncode == 2
    valid(usage.stderr if usage.stderr.lstrip().startswith("{") else usage.stdout, "exec, empty command")


def test_usage_errors_in_json(tmp_path: Path) -> None:
    run = fa_doctor("check", "--json", "--timeout", "nan")
    assert run.returncode == 2 and valid(run.stdout, "check, bad option")["error"]


def test_explain_documents(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    paste = "ValueError: Invalid version: self.fa_impl_ver=5"
    valid(cli("explain", "--json", paste).stdout, "explain")
    stack(fenv)
    doc = valid(cli("explain", "--json", "--python", fenv.python, paste).stdout, "explain, --python")
    assert doc["matches"] and doc["target"]
    valid(cli("explain", "--json", "nothing known here").stdout, "explain, no match")
    unreadable = cli("explain", "--json", "--file", str(tmp_path / "missing.log"))
    assert valid(unreadable.stdout, "explain, unreadable")["error"]


def test_fix_documents(cli: Any, fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack(fenv)
    monkeypatch.setenv("SGLANG_FLASHATTENTION_VERSION", "5")
    plan = valid(cli("fix", "--json", "--no-smoke", "--python", fenv.python).stdout, "fix --plan")
    assert plan["mode"] == "plan" and plan["check"]
    envfile = tmp_path / "server.env"
    envfile.write_text("SGLANG_FLASHATTENTION_VERSION=5\nOTHER=1\n")
    dry = cli("fix", "--unset-override", "--json", "--env-file", str(envfile), "--dry-run")
    assert valid(dry.stdout, "fix --unset-override --dry-run")["edits"][0]["changed"]
    valid(cli("fix", "--unset-override", "--set", "3", "--json", "--shell", "fish").stdout, "fix --set")
    refused = cli("fix", "--unset-override", "--json", "--env-file", str(tmp_path / "absent.env"))
    valid(refused.stdout, "fix --unset-override, missing file")


def test_fix_apply_document(tmp_path: Path) -> None:
    home = tmp_path / "p"
    stray = home / "flash_attn"
    stray.mkdir(parents=True)
    (stray / "__init__.abi3.so").touch()
    run = fa_doctor("fix", "--apply", "--yes", "--only", "package.unmanaged", "--no-smoke", "--json", cwd=home)
    doc = valid(run.stdout, "fix --apply")
    assert doc["applied"]["ran"] and "package.unmanaged" in doc["fixed"]


def test_fix_apply_dry_run_document_with_an_unfinished_apply(
    fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fix --apply --dry-run` (the proofs, a refused build) over an earlier apply's journal (its leftovers)."""
    import tempfile

    from fix_apply_fake import SitePip

    from fa_doctor.commands.fix import FixOptions, run
    from fa_doctor.fix import journal
    from fa_doctor.model.options import CheckOptions
    from fa_doctor.render.json import JsonRenderer

    fenv.torch()
    fenv.fa2(native=False)
    fenv.fa4()
    SitePip(fenv.site, tmp_path / "pipctl")
    temp = tmp_path / "tmp"
    (temp / "fa-doctor-apply-old").mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    book = journal.Journal(str(temp / "fa-doctor-apply-old" / "journal.json"), fenv.python, [str(fenv.site)])
    book.add(0, "moved /x to /x.fa-doctor-backup", "mv -n -- /x.fa-doctor-backup /x", {"kind": "move", "src": "/x",
             "dst": "/x.fa-doctor-backup"})  # fmt: skip
    env = {"PATH": os.environ.get("PATH", ""), "XDG_CACHE_HOME": str(tmp_path / "c"), "CUDA_HOME": str(tmp_path / "n")}
    result = run(FixOptions(CheckOptions(python=fenv.python, smoke=False, env=env), apply=True, dry_run=True))
    doc = valid(JsonRenderer().format(result), "fix --apply --dry-run, unfinished apply")
    assert doc["dry_run"] and doc["applied"]["proven"] and doc["applied"]["leftovers"]
    assert any(r.get("fix_refused") for f in doc["findings"] for r in f["remedies"])


def test_merge_documents(cli: Any, tmp_path: Path) -> None:
    folder = write(
        tmp_path / "reports", {f"n{i}": report(f"n{i}", findings=(REQUIREMENT,) if i else ()) for i in range(3)}
    )
    (folder / "broken.json").write_text("{")
    valid(cli("merge", "--json", str(folder)).stdout, "merge")
    valid(cli("merge", "--json", "--expect", "5", str(folder)).stdout, "merge --expect")
    nothing = cli("merge", "--json", str(tmp_path / "none"))
    valid(nothing.stdout, "merge, nothing readable")


def test_fleet_document_without_a_cluster() -> None:
    """`fleet ray` at an address where nothing answers: still one fleet document (a real cluster: test_fleet_ray)."""
    run = fa_doctor("fleet", "ray", "--json", "--address", "127.0.0.1:9", "--no-smoke")
    doc = valid(run.stdout, "fleet, no cluster")
    assert run.returncode == 2 and doc["command"] == "fleet" and doc["error"]


@pytest.mark.parametrize("name", ["report.json", "fleet.json"])
def test_golden_documents(name: str) -> None:
    """The renderer goldens: every section filled (a hand-made fleet with unreachable nodes, hostile text)."""
    valid((ROOT / "tests" / "golden" / name).read_text(encoding="utf-8"), f"golden {name}")


# Action kinds no remedy builds today (described all the same, since render/json.py writes any of KINDS).
NOT_EMITTED: dict[str, str] = {
    "pip-uninstall": "no remedy uninstalls (the planner moves shadowed copies aside by path)",
    "edit-file": "env files are edited by `fix --unset-override --env-file`, which no remedy holds as an action",
}


def _not_emitted() -> set[str]:
    variants = SCHEMA["$defs"]["Action"]["oneOf"]
    return {
        f"#/$defs/Action/oneOf/{i}/properties/{key}"
        for i, v in enumerate(variants)
        if v["properties"]["kind"]["const"] in NOT_EMITTED
        for key in v["properties"]
    }


def test_every_described_key_is_emitted() -> None:
    """Runs last in this module: the keys the documents above carried cover every key the schema describes."""
    assert len(_documents) >= 20, "run the whole module"
    described = {(where, key) for props, where in ((p, w) for p, w in _walk_properties()) for key in props}
    missing = sorted(f"{w}/{k}" for w, k in described - _seen if f"{w}/{k}" not in _not_emitted())
    assert not missing, "\n".join(missing)


def _walk_properties() -> Iterator[tuple[dict[str, Any], str]]:
    def walk(node: Any) -> Iterator[tuple[dict[str, Any], str]]:
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict) and id(props) in POINTERS:
                yield props, POINTERS[id(props)]
            for key, value in node.items():
                if key != "if":
                    yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    yield from walk(SCHEMA)
