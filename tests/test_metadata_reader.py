"""Reading distributions with importlib.metadata under fa-doctor's bounds: oversize, undecodable and malformed
files give a distribution (or a problem), never a traceback; where fa-doctor keeps a rule of its own over the
library's, the test says which verdict it protects. FIFOs and devices: test_hardening_files.py."""

from __future__ import annotations

import json
import os
from importlib.metadata import Distribution as Reference
from pathlib import Path

import pytest

from fa_doctor.diagnose.derive.inventory import missing_files
from fa_doctor.model.install import Distribution
from fa_doctor.probes.distributions import _direct_url, scan_distributions

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dist-info"

REQUIRES_TXT = """\
torch
einops>=0.6

[triton]
triton>=2.0

[:sys_platform == "linux"]
nvidia-ml-py

[cu13:python_version >= "3.10"]
nvidia-cutlass-dsl-libs-cu13==4.8.1
foo @ https://example.com/foo.whl
"""


def _info(site: Path, dirname: str, files: dict[str, str | bytes]) -> Path:
    info = site / dirname
    info.mkdir(parents=True)
    for name, content in files.items():
        (info / name).write_bytes(content.encode() if isinstance(content, str) else content)
    return info


def _one(site: Path) -> Distribution:
    (dist,) = scan_distributions([str(site)]).distributions
    return dist


def test_scan_survives_odd_folder_names(tmp_path: Path) -> None:
    odd = ("a\nb-1.0.dist-info", "-1.0.dist-info", ".dist-info", "x\\y-2.dist-info", os.fsdecode(b"\xff-3.egg-info"))
    for name in odd:
        (tmp_path / name).mkdir()
    _info(tmp_path, "flash_attn-2.8.3.dist-info", {"METADATA": "Name: flash-attn\nVersion: 2.8.3\n"})
    scan = scan_distributions([str(tmp_path)])
    assert [d.name for d in scan.distributions] == ["flash-attn"]
    assert scan.total == 6 and scan.index["flash-attn"] == "2.8.3" and scan.index["a\nb"] == "1.0"


def test_egg_info_requirements_as_importlib_metadata(tmp_path: Path) -> None:
    fa = _info(
        tmp_path,
        "flash_attn-2.8.3.egg-info",
        {"PKG-INFO": "Name: flash_attn\nVersion: 2.8.3\n", "requires.txt": REQUIRES_TXT},
    )
    quack = "Metadata-Version: 2.4\nName: quack-kernels\nVersion: 0.6.5\nRequires-Dist: torch\n"
    _info(tmp_path, "quack_kernels-0.6.5.egg-info", {"PKG-INFO": quack, "requires.txt": "numpy\n"})
    (tmp_path / "flashinfer_python-0.7.2.egg-info").write_text("Name: flashinfer-python\nVersion: 0.7.2\n")  # a file
    got = {d.name: d for d in scan_distributions([str(tmp_path)]).distributions}
    assert list(got["flash_attn"].requires) == Reference.at(fa).requires
    assert 'triton>=2.0; extra == "triton"' in got["flash_attn"].requires
    assert got["quack-kernels"].requires == ("torch",)  # Requires-Dist wins over requires.txt
    fi = got["flashinfer-python"]
    assert (fi.version, fi.problem) == ("0.7.2", None)


def test_real_wheel_metadata(tmp_path: Path) -> None:
    """sglang 0.5.23 folds its whole licence into License: with whitespace-only lines (where naive readers stop
    early and lose all 139 requirements); RECORD, top_level.txt and the wheel's files as published."""
    for src in FIXTURES.iterdir():
        info = tmp_path / src.name
        info.mkdir()
        for f in src.iterdir():
            (info / f.name).write_bytes(f.read_bytes())
    scan = scan_distributions([str(tmp_path)], interesting=lambda _: True)
    assert len(scan.distributions) == len(list(FIXTURES.iterdir())) >= 11
    for dist in scan.distributions:
        ref = Reference.at(dist.metadata_dir)
        assert (dist.name, dist.version, dist.problem) == (ref.name, ref.version, None)
        assert list(dist.requires) == (ref.requires or [])
        if dist.files is not None:
            assert list(dist.files) == [str(f) for f in ref.files or ()]
    sglang = scan.first("sglang")
    assert sglang is not None and len(sglang.requires) == 139 and sglang.files is None  # its RECORD is not read
    assert "torch==2.14.1" in sglang.requires and sglang.top_level == ("sglang",)
    fa4 = scan.first("flash-attn-4")
    assert fa4 is not None and fa4.files and "flash_attn/cute/interface.py" in fa4.files


def test_oversize_files_are_read_up_to_their_limit(tmp_path: Path) -> None:
    """METADATA past 1 MiB and RECORD past 8 MiB: the head is read (the headers come first), the rest is not."""
    body = "x" * 80 + "\n"
    meta = "Metadata-Version: 2.1\nName: flash-attn\nVersion: 2.8.3\nRequires-Dist: torch\n\n" + body * 20_000
    rows = "".join(f"flash_attn/m{i:07d}.py,sha256=abc,1234\n" for i in range(300_000))  # 12 MB
    _info(tmp_path, "flash_attn-2.8.3.dist-info", {"METADATA": meta, "RECORD": rows})
    dist = _one(tmp_path)
    assert (dist.version, dist.requires, dist.problem) == ("2.8.3", ("torch",), None)
    assert dist.files is not None and 150_000 < len(dist.files) < 300_000


def test_undecodable_and_crlf_metadata(tmp_path: Path) -> None:
    """importlib.metadata raises UnicodeDecodeError on bad UTF-8; fa-doctor replaces the bytes and reads on."""
    meta = (
        b"Metadata-Version: 2.1\r\nName: flash-attn\r\nVersion: 2.8.3\r\nSummary: caf\xff\r\nRequires-Dist: torch\r\n"
    )
    _info(tmp_path, "flash_attn-2.8.3.dist-info", {"METADATA": meta, "top_level.txt": b"flash_attn\r\n\xff\n"})
    dist = _one(tmp_path)
    assert (dist.version, dist.requires, dist.problem) == ("2.8.3", ("torch",), None)
    assert dist.top_level == ("flash_attn", "\ufffd")


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ({"METADATA": ""}, "METADATA is empty"),
        ({"METADATA": "\x00\xff garbage\nName\n\n"}, "METADATA has no Name or Version"),
        ({"METADATA": "Name: flash-attn\n"}, "METADATA has no Name or Version"),
        ({}, "no METADATA file"),
    ],
)
def test_metadata_problems(tmp_path: Path, files: dict[str, str | bytes], problem: str) -> None:
    _info(tmp_path, "flash_attn-2.8.3.dist-info", files)
    assert _one(tmp_path).problem == problem


@pytest.mark.parametrize(
    "record",
    ["a.py,sha256=x,notasize\n", "a.py,sha256=x,1,extra\n", "a.py,,\n\nb.py,,\n", '"unterminated,,\n', "a\x00.py,,\n"],
)
def test_record_rows_importlib_metadata_cannot_read(tmp_path: Path, record: str) -> None:
    """A row of the wrong shape makes importlib.metadata raise (csv.Error, ValueError, TypeError): the files are
    then unknown (None), as with no RECORD, and the distribution is read all the same."""
    _info(tmp_path, "flash_attn-2.8.3.dist-info", {"METADATA": "Name: flash-attn\nVersion: 2.8.3\n", "RECORD": record})
    dist = _one(tmp_path)
    assert (dist.version, dist.problem) == ("2.8.3", None)
    assert dist.files is None or all(isinstance(f, str) for f in dist.files)


def test_egg_files_come_from_installed_files_never_sources(tmp_path: Path) -> None:
    """An egg-info's installed files are in installed-files.txt (pip's legacy installs). importlib.metadata of
    Python 3.10 and 3.11 reads SOURCES.txt instead, the sdist's source list: a healthy `setup.py install` egg
    would then have csrc/*.cu and setup.py "listed in RECORD but missing" (package.broken)."""
    sources = "setup.py\ncsrc/flash_attn/flash_api.cpp\nflash_attn/__init__.py\nflash_attn.egg-info/PKG-INFO\n"
    egg = tmp_path / "flash_attn-2.8.3-py3.11-linux-x86_64.egg"
    _info(egg, "EGG-INFO", {"PKG-INFO": "Name: flash-attn\nVersion: 2.8.3\n", "SOURCES.txt": sources})
    (egg / "flash_attn").mkdir()
    (egg / "flash_attn" / "__init__.py").write_text("")
    dist = _one(egg)
    assert (dist.version, dist.files, missing_files(dist)) == ("2.8.3", None, [])

    site = tmp_path / "site"
    listed = "../flash_attn/__init__.py\n../flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so\nPKG-INFO\n"
    _info(site, "flash_attn-2.8.3.egg-info", {"PKG-INFO": "Name: flash-attn\nVersion: 2.8.3\n", "SOURCES.txt": sources})
    (site / "flash_attn-2.8.3.egg-info" / "installed-files.txt").write_text(listed)
    dist = _one(site)
    assert dist.files == (
        "flash_attn/__init__.py",
        "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so",
        "flash_attn-2.8.3.egg-info/PKG-INFO",
    )


@pytest.mark.parametrize(
    ("text", "url", "editable"),
    [
        ('{"url": "file:///src/fa", "dir_info": {"editable": true}}', "file:///src/fa", "/src/fa"),
        ('{"url": "file://localhost/src/fa", "dir_info": {"editable": true}}', "file://localhost/src/fa", "/src/fa"),
        (
            '{"url": "file:///src/my%20fa#frag", "dir_info": {"editable": true}}',
            "file:///src/my%20fa#frag",
            "/src/my fa",
        ),
        (
            '{"url": "file://server/share/fa", "dir_info": {"editable": true}}',
            "file://server/share/fa",
            "//server/share/fa",
        ),
        ('{"url": "file:///src/fa", "dir_info": {}}', "file:///src/fa", None),
        ('{"url": "file:///src/fa", "dir_info": {"editable": "yes"}}', "file:///src/fa", None),
        ('{"url": "https://x/fa-2.8.3-cp311.whl", "archive_info": {}}', "https://x/fa-2.8.3-cp311.whl", None),
        ('{"url": "https://x", "dir_info": {"editable": true}}', "https://x", None),
        ('["url"]', None, None),
        ('{"url": 3}', None, None),
        ("not json", None, None),
        ("[" * 100_000, None, None),  # deeper than the stack: no RecursionError
        (None, None, None),
    ],
)
def test_direct_url(text: str | None, url: str | None, editable: str | None) -> None:
    assert _direct_url(text) == (url, editable)


def test_side_files_read_through_the_scan(tmp_path: Path) -> None:
    src = tmp_path / "src"
    files = {
        "METADATA": "Name: flash-attn-3\nVersion: 3.0.0b1\n",
        "INSTALLER": "uv\n",
        "direct_url.json": json.dumps({"url": f"file://{src}", "dir_info": {"editable": True}}),
    }
    _info(tmp_path / "site", "flash_attn_3-3.0.0b1.dist-info", files)
    dist = _one(tmp_path / "site")
    assert (dist.installer, dist.editable_dir, dist.direct_url, dist.files) == ("uv", str(src), f"file://{src}", None)
