"""The verdict cache (docs/smoke.md, "Verdict cache"): a passing smoke verdict is reused while nothing it depends on
changes, and only then.

A fake node: a target venv with torch and FA4 (tests/fakeenv.py, FA4's real RECORD), an nvidia-smi on PATH that
reports H200s. The smoke child either runs for real through the harness (tests/smoke_fakes: real torch on the
CPU, the fake flash_attn.cute) or is a counting stand-in that returns a passing result at once.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fakeenv import FakeEnv, fake_nvidia_smi
from smoke_fakes.scenarios import FAKES, PYTHON, child_env

import fa_doctor
from fa_doctor.smoke import CaseResult, SmokeResult, SmokeTarget, case_specs, runner

UUID0 = "GPU-5f1e2c3a-0000-4000-8000-000000000000"
H200 = f"0, {UUID0}, NVIDIA H200, 9.0, 143771"
OTHER_H200 = "0, GPU-77777777-0000-4000-8000-000000000000, NVIDIA H200, 9.0, 143771"
SECOND_H200 = "1, GPU-00000001-0000-4000-8000-000000000000, NVIDIA H200, 9.0, 143771"
REAL_RUN_SMOKE = runner.run_smoke


@dataclass
class Node:
    fenv: FakeEnv
    tmp: Path
    calls: list[str] = field(default_factory=list)  # visible_devices of every smoke child started
    status: str = "passed"
    rows: tuple[str, ...] = (H200,)

    @property
    def cache(self) -> Path:
        return self.tmp / "cache" / "fa-doctor" / "verdicts"

    def gpus(self, *rows: str, driver: str = "580.159.04") -> None:
        self.rows = rows
        fake_nvidia_smi(self.tmp / "bin", rows, driver=driver)

    def verdicts(self) -> list[Path]:
        return sorted(self.cache.glob("*.json")) if self.cache.is_dir() else []

    def fake_run(self, python: str, target: SmokeTarget, **kw: Any) -> SmokeResult:
        """A smoke child that passes (or fails, by `status`) at once, as a real one reports it."""
        self.calls.append(kw["visible_devices"])
        cases = tuple(
            CaseResult(
                s["name"], s["function"], s["dtype"], s["head_dim"], s["causal"], 0.002, s["tolerance"], True, 0.1, None
            )
            for s in case_specs(target.api)
        )
        return SmokeResult(
            target.key,
            target.module,
            target.api,
            self.status,
            phases={"import": 0.5, "total": 1.0},
            cases=cases,
            module_file=str(self.fenv.site / "flash_attn" / "cute" / "__init__.py"),
            loaded=tuple(str(p) for p in sorted(self.fenv.site.rglob("*.py")) if "__pycache__" not in p.parts),
            visible_devices=kw["visible_devices"],
            device_name="NVIDIA H200",
            python=python,
        )


@pytest.fixture
def node(fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Node:
    fenv.torch()
    fenv.fa4()
    n = Node(fenv, tmp_path)
    env = fake_nvidia_smi(tmp_path / "bin", n.rows)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setattr(runner, "run_smoke", n.fake_run)
    return n


def check(cli: Any, node: Node, *extra: str) -> dict[str, Any]:
    run = cli("check", "--json", "--python", node.fenv.python, *extra)
    assert run.code == (0 if node.status == "passed" else 1), run.stdout
    doc: dict[str, Any] = json.loads(run.stdout)
    return doc


def touch_later(path: Path, data: bytes | None = None) -> None:
    if data is not None:
        path.write_bytes(data)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def test_unchanged_node_reuses_the_verdict_of_a_real_run(
    cli: Any, node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness runs the real child once; the second check reports the same results from the cache."""

    def via_harness(python: str, target: SmokeTarget, **kw: Any) -> SmokeResult:
        node.calls.append(kw["visible_devices"])
        env = child_env(FAKES / "cute")
        kw.update(device="cpu", env=env, cache_dir=str(tmp_path / "cute-dsl"))
        return REAL_RUN_SMOKE(PYTHON, target, **kw)

    monkeypatch.setattr(runner, "run_smoke", via_harness)
    first = check(cli, node)
    assert first["smoke"]["cached"] is False and first["smoke"]["results"][0]["status"] == "passed"
    assert len(first["smoke"]["fingerprint"]) == 64 and first["smoke"]["proven"]["host"] == os.uname().nodename
    second = check(cli, node)
    assert node.calls == [UUID0]  # the kernels ran once
    assert second["smoke"]["cached"] is True
    assert second["smoke"]["fingerprint"] == first["smoke"]["fingerprint"]
    assert second["smoke"]["proven"] == first["smoke"]["proven"]
    assert second["smoke"]["results"] == first["smoke"]["results"]
    passed = next(f for f in second["findings"] if f["id"] == "smoke.passed")
    assert passed["evidence"]["cached"] is True and "verdict reused" in passed["title"]
    human = cli("check", "--python", node.fenv.python)
    assert f"proven {first['smoke']['proven']['at']} on {os.uname().nodename}" in human.stdout
    assert "--fresh runs the kernels again" in human.stdout


def test_fresh_and_no_cache_run_the_kernels(cli: Any, node: Node) -> None:
    check(cli, node)
    assert check(cli, node, "--fresh")["smoke"]["cached"] is False
    assert check(cli, node, "--no-cache")["smoke"]["cached"] is False
    assert len(node.calls) == 3
    assert check(cli, node)["smoke"]["cached"] is True and len(node.calls) == 3


def test_exec_reuses_the_verdict_and_starts_the_command(cli: Any, node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    from fa_doctor.commands import exec as exec_command

    started: list[list[str]] = []
    monkeypatch.setattr(exec_command, "become", lambda command, env: started.append(list(command)) or 0)
    check(cli, node)
    run = cli("exec", "--json", "--python", node.fenv.python, "--", "true")
    assert run.code == 0 and len(node.calls) == 1 and started == [["true"]]
    assert json.loads(run.stderr)["smoke"]["cached"] is True


def _fa4_file(node: Node) -> None:
    touch_later(node.fenv.site / "flash_attn" / "cute" / "interface.py", b"# edited in place\n")


def _driver(node: Node) -> None:
    node.gpus(*node.rows, driver="590.10.01")


def _gpu_uuid(node: Node) -> None:
    node.gpus(OTHER_H200)


def _dsl_record(node: Node) -> None:
    record = next(node.fenv.site.glob("nvidia_cutlass_dsl_libs_base-*.dist-info")) / "RECORD"
    touch_later(record, record.read_bytes() + b"extra/file.py,,\n")


def _torch(node: Node) -> None:
    touch_later(node.fenv.site / "torch" / "version.py")


@pytest.mark.parametrize(
    ("change", "part"),
    [
        (_fa4_file, "dist:flash-attn-4"),
        (_dsl_record, "dist:nvidia-cutlass-dsl-libs-base"),
        (_driver, "gpus"),
        (_gpu_uuid, "gpus"),
        (_torch, "torch"),
    ],
)
def test_a_changed_input_runs_the_kernels_again(
    cli: Any, node: Node, change: Callable[[Node], None], part: str
) -> None:
    before = check(cli, node)
    change(node)
    after = check(cli, node)
    assert after["smoke"]["cached"] is False and len(node.calls) == 2
    assert after["smoke"]["fingerprint"] != before["smoke"]["fingerprint"]
    assert part in after["smoke"]["changed"]
    assert check(cli, node)["smoke"]["cached"] is True and len(node.calls) == 2  # the new verdict holds


def test_a_rewritten_pyc_does_not_invalidate(cli: Any, node: Node) -> None:
    """pip lists the .pyc files it compiled in RECORD; an import rewrites a stale one. Its source stands for it."""
    record = next(node.fenv.site.glob("flash_attn_4-*.dist-info")) / "RECORD"
    pyc = node.fenv.site / "flash_attn" / "cute" / "__pycache__" / "interface.cpython-311.pyc"
    pyc.parent.mkdir()
    pyc.write_bytes(b"old")
    record.write_bytes(record.read_bytes() + b"flash_attn/cute/__pycache__/interface.cpython-311.pyc,,\n")
    check(cli, node)
    touch_later(pyc, b"recompiled")
    assert check(cli, node)["smoke"]["cached"] is True and len(node.calls) == 1


def test_a_knob_is_part_of_the_fingerprint(cli: Any, node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    check(cli, node)
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    after = check(cli, node)
    assert after["smoke"]["cached"] is False and after["smoke"]["changed"] == ["env:CUTE_DSL_ARCH"]
    monkeypatch.delenv("CUTE_DSL_ARCH")
    assert check(cli, node)["smoke"]["cached"] is True and len(node.calls) == 2  # the first verdict still holds


def test_another_fa_doctor_version_runs_again(cli: Any, node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    check(cli, node)
    monkeypatch.setattr(fa_doctor, "__version__", "99.0.0")
    assert check(cli, node)["smoke"]["cached"] is False and len(node.calls) == 2
    assert check(cli, node)["smoke"]["cached"] is True and len(node.calls) == 2


def test_every_gpu_is_in_the_verdict(cli: Any, node: Node) -> None:
    node.gpus(H200, SECOND_H200)
    both = check(cli, node)
    assert len(node.calls) == 2 and check(cli, node)["smoke"]["cached"] is True
    one = check(cli, node, "--gpus", "0")
    assert one["smoke"]["cached"] is False and one["smoke"]["fingerprint"] != both["smoke"]["fingerprint"]


def test_a_failing_verdict_is_never_stored(cli: Any, node: Node) -> None:
    node.status = "mismatch"
    for _ in range(2):
        doc = check(cli, node)
        assert doc["smoke"]["cached"] is False and doc["smoke"]["proven"] is None
    assert len(node.calls) == 2 and node.verdicts() == []


def test_a_failing_fresh_run_removes_the_stored_verdict(cli: Any, node: Node) -> None:
    node.status = "passed"
    check(cli, node)
    assert len(node.verdicts()) == 1
    node.status = "crashed"
    check(cli, node, "--fresh")
    assert node.verdicts() == []
    node.status = "passed"
    assert check(cli, node)["smoke"]["cached"] is False and len(node.calls) == 3


def test_files_and_folders_are_private(cli: Any, node: Node) -> None:
    check(cli, node)
    (verdict,) = node.verdicts()
    assert stat.S_IMODE(verdict.stat().st_mode) == 0o600
    assert stat.S_IMODE(node.cache.stat().st_mode) == 0o700
    assert stat.S_IMODE(node.cache.parent.stat().st_mode) == 0o700
    node.cache.chmod(0o777)  # left open (another tool, a umask): made private again, not trusted as it was
    check(cli, node)
    assert stat.S_IMODE(node.cache.stat().st_mode) == 0o700


@pytest.mark.parametrize("where", ["fa-doctor", "verdicts"])
def test_a_linked_cache_folder_is_refused(cli: Any, node: Node, tmp_path: Path, where: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    link = node.cache.parent if where == "fa-doctor" else node.cache
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere)
    for _ in range(2):
        assert check(cli, node)["smoke"]["cached"] is False
    assert len(node.calls) == 2 and list(elsewhere.rglob("*.json")) == []


def test_a_linked_verdict_file_is_not_followed(cli: Any, node: Node, tmp_path: Path) -> None:
    check(cli, node)
    (verdict,) = node.verdicts()
    moved = tmp_path / "moved.json"
    verdict.rename(moved)
    verdict.symlink_to(moved)
    assert check(cli, node)["smoke"]["cached"] is False and len(node.calls) == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_of_another_user_is_refused(cli: Any, node: Node) -> None:
    check(cli, node)
    os.chown(node.cache, 4242, -1)
    assert check(cli, node)["smoke"]["cached"] is False and len(node.calls) == 2


def _garbage(doc: dict[str, Any], raw: bytes) -> bytes:
    return b"\x00\xff not json"


def _truncated(doc: dict[str, Any], raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


def _failed(doc: dict[str, Any], raw: bytes) -> bytes:
    doc["results"][0]["result"]["status"] = "mismatch"
    return json.dumps(doc).encode()


def _other_fingerprint(doc: dict[str, Any], raw: bytes) -> bytes:
    doc["fingerprint"] = "0" * 64
    return json.dumps(doc).encode()


def _wrong_types(doc: dict[str, Any], raw: bytes) -> bytes:
    doc["results"][0]["result"]["cases"][0]["head_dim"] = "128"
    return json.dumps(doc).encode()


def _number_too_big_for_a_float(doc: dict[str, Any], raw: bytes) -> bytes:
    doc["results"][0]["result"]["cases"][0]["tolerance"] = 10**400
    return json.dumps(doc).encode()


def _huge(doc: dict[str, Any], raw: bytes) -> bytes:
    doc["padding"] = "x" * (9 << 20)
    return json.dumps(doc).encode()


def _deep(doc: dict[str, Any], raw: bytes) -> bytes:
    return b"[" * 100000 + b"]" * 100000


@pytest.mark.parametrize(
    "spoil",
    [_garbage, _truncated, _failed, _other_fingerprint, _wrong_types, _number_too_big_for_a_float, _huge, _deep],
)
def test_a_corrupted_or_foreign_file_is_ignored(
    cli: Any, node: Node, spoil: Callable[[dict[str, Any], bytes], bytes]
) -> None:
    check(cli, node)
    (verdict,) = node.verdicts()
    raw = verdict.read_bytes()
    verdict.write_bytes(spoil(json.loads(raw), raw))
    assert check(cli, node)["smoke"]["cached"] is False and len(node.calls) == 2
    assert check(cli, node)["smoke"]["cached"] is True and len(node.calls) == 2  # replaced by a good one
