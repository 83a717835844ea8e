"""The smoke runner against a child that lies, floods or escapes, and the FA4 compile cache's identity.

Children that import torch take 1-2 s each, so the cache scenarios start together in one module fixture.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from smoke_fakes.scenarios import FA4, FAKES, child_env
from test_hardening_proc import leftovers, marker, script

from fa_doctor.model.finding import Remedy
from fa_doctor.render.shell import finding_dict
from fa_doctor.smoke import SmokeResult, SmokeTarget
from fa_doctor.smoke.findings import smoke_findings
from fa_doctor.smoke.runner import run_smoke

PYTHON = sys.executable
FA2 = SmokeTarget("fa2", "flash_attn", "fa2")
CACHE_VARS = (
    "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED",
    "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR",
    "SGLANG_CUTE_AOT_CACHE_DIR",
    "CUTE_DSL_CACHE_DIR",
    "CUTE_DSL_DISABLE_FILE_CACHING",
)


def fake_child(tmp_path: Path, lines: list[bytes], tail: str = "") -> str:
    """An "interpreter" that ignores the child source and writes these raw lines to the result pipe."""
    path = tmp_path / "python"
    path.write_text(
        f"#!{PYTHON}\nimport json, os, sys\nfd = json.loads(sys.argv[3])['fd']\n"
        f"for line in {lines!r}:\n    os.write(fd, line)\n{tail}"
    )
    path.chmod(0o755)
    return str(path)


def strict(result: SmokeResult) -> dict[str, Any]:
    doc = result.to_dict()
    return json.loads(json.dumps(doc, allow_nan=False))  # type: ignore[no-any-return]


def reinstall(key: str, problem: object) -> tuple[Remedy, ...]:
    return (Remedy(f"reinstall {key}", ()),)


MALFORMED = [
    b'{"event": "phase", "name": "import", "state": "start", "t": "notafloat"}\n',  # the line
    b'{"event": "phase", "name": "import", "state": "end", "t": NaN}\n',
    b'{"event": "phase", "name": ["x"], "state": "start", "t": 1}\n',
    b'{"event": "phase", "name": "first_call", "state": "start", "t": Infinity}\n',
    b'{"event": "phase", "name": "check", "state": "start", "t": true}\n',
    b'{"event": "info", "environment": "notadict", "module_file": ["a"], "cache_dir": 5, "cache_warm": "yes"}\n',
    b'{"event": "info", "environment": {"torch": ["2", "9"], "k": null}}\n',
    b'{"event": "case", "name": "varlen_bf16_d128_causal", "max_abs_err": "0.0", "seconds": 1e999, "error": "s"}\n',
    b'{"event": "case", "name": "varlen_bf16_d128_noncausal", "max_abs_err": true, "seconds": -Infinity,'
    b' "error": {"type": ["x"], "message": {"a": 1}}}\n',
    b'{"event": "case", "name": "varlen_bf16_d64_causal", "max_abs_err": NaN, "error": null}\n',
    b'{"event": "case", "name": {"not": "hashable"}}\n',
    b'{"event": "case"}\n',
    b'{"event": "warning", "text": {"a": 1}}\n',
    b'{"event": "fatal", "chain": "notalist", "type": 5, "message": null, "traceback": null, "stage": []}\n',
    b'{"event": "import_error", "chain": [1, null, {"x": 2}]}\n',
    b"[" * 200000 + b"\n",  # nesting deeper than the JSON parser's recursion limit
    b"x" * (3 << 20) + b"\n",  # one 3 MB line
    b"\xff\xfe not utf-8\n",
    b"42\n",
    b"null\n",
    b'"a string"\n',
    b'{"event": "done"}\n',
    b'{"event": "phase", "name": "cut short", "state": "start", "t": 1',  # no newline: the child died
]


def test_malformed_events_neither_crash_nor_leak_into_the_report(tmp_path: Path) -> None:
    result = run_smoke(fake_child(tmp_path, MALFORMED), FA2, device="cpu", timeout=20)
    doc = strict(result)
    assert result.status == "failed"  # the first failure event (the fatal one) wins, as from a real child
    assert "total" in result.phases and all(math.isfinite(v) for v in result.phases.values())
    assert result.environment == {"torch": "['2', '9']", "k": ""}
    assert result.module_file == "['a']" and doc["cache_dir"] is None
    for case in result.cases:
        assert case.max_abs_err is None and not case.passed and case.seconds is None
    assert [c.error for c in result.cases][:2] == ["s", "['x']: {'a': 1}"]
    assert result.error is not None
    for finding in smoke_findings(result, reinstall=reinstall):
        json.dumps(finding_dict(finding), allow_nan=False)


def test_case_events_with_garbage_numbers_are_failed_cases_not_crashes(tmp_path: Path) -> None:
    lines = [
        b'{"event": "case", "name": "varlen_bf16_d128_causal", "max_abs_err": NaN, "seconds": "1"}\n',
        b'{"event": "case", "name": "varlen_bf16_d128_noncausal", "max_abs_err": 0.001, "seconds": 0.5}\n',
        b'{"event": "done"}\n',
    ]
    result = run_smoke(fake_child(tmp_path, lines), FA2, device="cpu", timeout=20)
    strict(result)
    assert result.status == "mismatch"
    assert [c.passed for c in result.cases] == [False, True] and result.cases[1].seconds == 0.5


def test_integers_too_big_for_a_float_are_invalid_numbers_not_crashes(tmp_path: Path) -> None:
    huge = str(10**400).encode()  # valid JSON; float() of it raises OverflowError
    lines = [
        b'{"event": "phase", "name": "import", "state": "start", "t": ' + huge + b"}\n",
        b'{"event": "phase", "name": "import", "state": "end", "t": 2}\n',
        b'{"event": "case", "name": "varlen_bf16_d128_causal", "max_abs_err": '
        + huge
        + b', "seconds": -'
        + huge
        + b"}\n",
        b'{"event": "case", "name": "varlen_bf16_d128_noncausal", "max_abs_err": 0.001, "seconds": 0.5}\n',
        b'{"event": "done"}\n',
    ]
    result = run_smoke(fake_child(tmp_path, lines), FA2, device="cpu", timeout=20)
    strict(result)
    assert result.status == "mismatch" and "import" not in result.phases
    assert [(c.max_abs_err, c.seconds, c.passed) for c in result.cases] == [(None, None, False), (0.001, 0.5, True)]


def test_event_flood_is_bounded(tmp_path: Path) -> None:
    tail = 'line = b\'{"event": "warning", "text": "w"}\\n\' * 1000\nfor _ in range(200):\n    os.write(fd, line)\n'
    start = time.monotonic()
    result = run_smoke(fake_child(tmp_path, [], tail), FA2, device="cpu", timeout=20)
    assert time.monotonic() - start < 15
    assert result.status == "crashed" and len(result.warnings) <= 50


def test_timeout_ends_the_child_and_a_setsid_grandchild(tmp_path: Path) -> None:
    m, n, ready = marker(), marker(), tmp_path / "ready"
    python = script(
        tmp_path,
        f"setsid sh -c 'echo $$ > {ready}; exec sleep {m}' &\nsleep {n}\n",
        "python",
    )
    start = time.monotonic()
    result = run_smoke(python, FA2, device="cpu", timeout=1, reap_seconds=2)
    assert result.status == "timeout" and time.monotonic() - start < 4
    assert leftovers(m, n) == []


def test_exited_child_leaves_no_helper_behind(tmp_path: Path) -> None:
    m = marker()
    path = fake_child(tmp_path, [b'{"event": "done"}\n'], f"import subprocess\nsubprocess.Popen(['sleep', '{m}'])\n")
    result = run_smoke(path, FA2, device="cpu", timeout=20)
    assert result.status in ("passed", "mismatch") and result.returncode == 0
    assert leftovers(m) == []


# --- FA4 compile cache identity --------------------------------------------------------------------------

ENVPROBE = """import json, os, sys
print("ENV " + json.dumps({k: os.environ.get(k) for k in %r}))
raise ImportError("envprobe stops here")
"""
PROBE = SmokeTarget("fa4-sglang", "envprobe", "cute")


def seen_env(result: SmokeResult) -> dict[str, str | None]:
    line = next(ln for ln in result.stdout_tail.splitlines() if ln.startswith("ENV "))
    return json.loads(line[4:])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def cache_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("cache")
    probe_root = tmp / "probe"
    probe_root.mkdir()
    (probe_root / "envprobe.py").write_text(ENVPROBE % (CACHE_VARS,))
    user = {
        "SGLANG_CUTE_AOT_CACHE_DIR": str(tmp / "user-sglang"),
        "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR": str(tmp / "user-fa"),
        "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED": "1",
        "CUTE_DSL_CACHE_DIR": str(tmp / "user-cute"),
    }
    base = {**child_env(probe_root), "PYTHONPATH": str(probe_root)}
    cache = str(tmp / "fa-cache")

    def probe(use_cache: bool, **extra: str) -> Callable[[], SmokeResult]:
        env = {**base, **user, **extra}
        return lambda: run_smoke(PYTHON, PROBE, device="cpu", timeout=60, use_cache=use_cache, cache_dir=cache, env=env)

    def cute_sequence() -> tuple[list[SmokeResult], list[str]]:
        """The issue's trap: a cache filled without CUTE_DSL_ARCH must not serve a run with it."""
        env = child_env(FAKES / "cute", FAKE_COMPILE_SECONDS="0.3")
        progress: list[str] = []
        runs = []
        for extra in ({}, {}, {"CUTE_DSL_ARCH": "sm_100a"}, {"FLASH_ATTENTION_ARCH": "sm_100"}):
            runs.append(
                run_smoke(
                    PYTHON,
                    FA4,
                    device="cpu",
                    timeout=60,
                    cache_dir=str(tmp / "cute-cache"),
                    env={**env, **extra},
                    progress=progress.append,
                )
            )
        return runs, progress

    jobs: dict[str, Callable[[], Any]] = {
        "plain": probe(True),
        "plain_again": probe(True),
        "arch": probe(True, CUTE_DSL_ARCH="sm_100a"),
        "fa_arch": probe(True, FLASH_ATTENTION_ARCH="sm_100"),
        "off": probe(False),
        "cute": cute_sequence,
    }
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {k: pool.submit(v) for k, v in jobs.items()}
        out: dict[str, Any] = {k: f.result() for k, f in futures.items()}
    out["tmp"] = tmp
    return out


def test_cache_folder_depends_on_the_fa4_and_cute_variables(cache_runs: dict[str, Any]) -> None:
    dirs = {k: cache_runs[k].cache_dir for k in ("plain", "plain_again", "arch", "fa_arch")}
    assert dirs["plain"] is not None and dirs["plain"] == dirs["plain_again"]
    assert len({dirs["plain"], dirs["arch"], dirs["fa_arch"]}) == 3
    assert all(Path(str(d)).parent == cache_runs["tmp"] / "fa-cache" for d in dirs.values())
    identity = json.loads((Path(str(dirs["arch"])) / "identity.json").read_text())
    assert identity["env"]["CUTE_DSL_ARCH"] == "sm_100a" and identity["gpu"] == "cpu"
    assert "CUTE_DSL_CACHE_DIR" not in identity["env"]  # where a cache lives is not what it holds


def test_cached_run_uses_only_its_own_folders(cache_runs: dict[str, Any]) -> None:
    result: SmokeResult = cache_runs["plain"]
    seen = seen_env(result)
    folder = str(result.cache_dir)
    assert seen["FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"] == "1"
    assert seen["FLASH_ATTENTION_CUTE_DSL_CACHE_DIR"] == os.path.join(folder, "flash-attn")
    assert seen["SGLANG_CUTE_AOT_CACHE_DIR"] == os.path.join(folder, "sglang-aot")  # SGLang's vendored FA4
    assert seen["CUTE_DSL_CACHE_DIR"] == os.path.join(folder, "cute-dsl")
    tmp = cache_runs["tmp"]
    assert not any((tmp / name).exists() for name in ("user-sglang", "user-fa", "user-cute"))


def test_no_cache_disables_every_persistent_cache(cache_runs: dict[str, Any]) -> None:
    result: SmokeResult = cache_runs["off"]
    assert result.cache_dir is None
    assert seen_env(result) == {
        "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED": "0",
        "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR": None,
        "SGLANG_CUTE_AOT_CACHE_DIR": "",  # SGLang 0.5.23: empty keeps the AOT cache in memory
        "CUTE_DSL_CACHE_DIR": str(cache_runs["tmp"] / "user-cute"),
        "CUTE_DSL_DISABLE_FILE_CACHING": "1",
    }


def test_warm_cache_does_not_hide_an_arch_override(cache_runs: dict[str, Any]) -> None:
    runs, progress = cache_runs["cute"]
    cold, warm, arch, fa_arch = runs
    assert all(r.status == "passed" for r in runs), [r.status for r in runs]
    assert cold.cache_dir == warm.cache_dir and len({cold.cache_dir, arch.cache_dir, fa_arch.cache_dir}) == 3
    # Compiled (the fake sleeps 0.3 s and warns on a cache miss) or not: the warnings say it, not a time bound on
    # the warm run (an upper bound on time fails on a loaded machine).
    assert arch.phases["first_call"] >= 0.3 and fa_arch.phases["first_call"] >= 0.3
    assert not warm.warnings and all(any("JitArgument" in w for w in r.warnings) for r in (cold, arch, fa_arch))
    firsts = [p for p in progress if p.startswith(("compiling", "running"))]
    assert firsts == [
        "compiling FA4 kernels (first run)",
        "running first FA kernel call",
        "compiling FA4 kernels (first run)",
        "compiling FA4 kernels (first run)",
    ]
