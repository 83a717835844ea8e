"""Garbage on disk gives findings, never a traceback or exit 2."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fakeenv import FakeEnv


def check(cli: Any, fenv: FakeEnv) -> Any:
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python)
    assert run.code in (0, 1), run.stdout + run.stderr
    assert not [i for i in run.ids() if i.startswith("internal.")], run.ids()
    return run


def test_binary_and_nul_metadata(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    info = fenv.dist("flash-attn-4", "4.0.0b36", {"flash_attn/cute/__init__.py": ""})
    (info / "METADATA").write_bytes(b"\x00\xff\xfe garbage \x00\nName\n\n")
    (info / "RECORD").write_bytes(b"flash_attn/cute/__init__.py\x00,,\n\xff\xfe,\x00\n")
    (info / "top_level.txt").write_bytes(b"\xff\x00")
    (info / "direct_url.json").write_bytes(b"{not json")
    run = check(cli, fenv)
    assert "package.broken" in run.ids()


def test_metadata_missing_and_record_is_a_directory(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    info = fenv.dist("flash-attn", "2.8.3", {"flash_attn/__init__.py": ""}, record=False)
    (info / "METADATA").unlink()
    (info / "RECORD").mkdir()
    run = check(cli, fenv)
    assert "no METADATA file" in run.finding("package.broken")["detail"]


def test_unreadable_and_looping_paths(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch()
    fenv.fa4()
    (fenv.site / "loop").symlink_to(fenv.site / "loop")
    (fenv.site / "flash_attn_interface.py").symlink_to(tmp_path / "nowhere.py")
    locked = fenv.site / "locked.dist-info"
    locked.mkdir()
    os.chmod(locked, 0)
    try:
        check(cli, fenv)
    finally:
        os.chmod(locked, 0o755)


def test_egg_and_editable_installs(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch()
    egg = fenv.site / "flash_attn-2.8.3-py3.11-linux-x86_64.egg"
    (egg / "EGG-INFO").mkdir(parents=True)
    (egg / "EGG-INFO" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: flash-attn\nVersion: 2.8.3\n")
    (egg / "flash_attn").mkdir()
    (egg / "flash_attn" / "__init__.py").write_text("")
    (egg / "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (fenv.site / "easy-install.pth").write_text(f"{egg}\n")
    src = tmp_path / "src" / "flash-attention"
    (src / "hopper").mkdir(parents=True)
    (src / "hopper" / "flash_attn_interface.py").write_text("")
    info = fenv.dist("flash-attn-3", "3.0.0b1", {}, record=True)
    (info / "direct_url.json").write_text('{"url": "file://%s", "dir_info": {"editable": true}}' % (src / "hopper"))
    (fenv.site / "__editable__.flash_attn_3.pth").write_text(f"{src / 'hopper'}\n")
    run = check(cli, fenv)
    pkgs = {p["distribution"]: p for p in run.doc["packages"]}
    assert pkgs["flash-attn"]["version"] == "2.8.3" and pkgs["flash-attn-3"]["editable"] == str(src / "hopper")
    assert "package.shadowed" not in run.ids()
    assert "flash_attn_3._C" in run.finding("package.broken")["detail"]  # an editable build without its extension


def test_undecodable_bytes_and_ascii_terminal(fenv: FakeEnv, tmp_path: Path) -> None:
    """A path with invalid UTF-8 on the search path, an override with odd bytes, an ASCII-only stdout."""
    import subprocess
    import sys

    fenv.torch()
    fenv.fa4()
    odd = os.fsencode(str(tmp_path)) + b"/odd-\xff-dir"
    os.makedirs(odd)
    env = {**os.environ, "PYTHONPATH": os.fsdecode(odd), "PYTHONIOENCODING": "ascii"}
    env_b = {k.encode(): v.encode("utf-8", "surrogateescape") for k, v in env.items()}
    env_b[b"SGLANG_FLASHATTENTION_VERSION"] = b"\xff3"
    for extra in ([], ["--json"]):
        proc = subprocess.run(
            [sys.executable, "-m", "fa_doctor", "check", "--no-smoke", "-v", "--python", fenv.python, *extra],
            env=env_b,
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == 1, proc.stderr.decode(errors="replace")
        assert b"override.invalid" in proc.stdout and b"Traceback" not in proc.stderr


def test_uppercase_backend_name_is_explained(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4()
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python, "--attention-backend", "FA3")
    assert "lower-case" in run.finding("selection.unavailable")["detail"]
