"""fa_doctor.probes.metadata against the reader it imitates: email.message_from_string (compat32) followed by
importlib.metadata._adapters.Message, on hand-picked corners and on generated header blocks (fixed seed)."""

from __future__ import annotations

import email
import os
import textwrap
from importlib.metadata import Distribution, _adapters
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fa_doctor.probes import metadata
from fa_doctor.probes.distributions import scan_distributions

SGLANG = Path(__file__).resolve().parent / "fixtures" / "dist-info" / "sglang-0.5.23.dist-info" / "METADATA"


def reference(text: str) -> list[tuple[str, str]]:
    return list(_adapters.Message(email.message_from_string(text)).items())


def same(text: str) -> None:
    ours, theirs = metadata.parse(text), _adapters.Message(email.message_from_string(text))
    assert list(ours.items()) == list(theirs.items()), repr(text)
    for name in {k.lower() for k, _ in theirs.items()} | {"name", "version", "requires-dist", "x"}:
        assert ours.get(name) == theirs.get(name), name
        assert (ours.get_all(name) or None) == theirs.get_all(name), name


CORNERS = [
    "",
    "\n",
    "Name: a\nVersion: 1\n",
    "Name: a\nVersion: 1",  # no final line end
    "Name: a\n\nthe body\n\nsecond paragraph\n",
    "Name: a\nDescription: short\n\nlong body\n",  # two Description values
    "License: MIT\n        \n        more\nName: a\n",  # whitespace-only continuation (sglang 0.5.23)
    "License:\n  foo\n   bar\n \t\n",
    "A: 1\n\tb\n  c\n",
    "A:1\r\n b\r\n\r\nbody\r\n",
    "A:1\r b\r\rz",
    "A: 1\r\nB: 2\n\rbody",
    " leading continuation\nA: 1\n",
    ":no name\n continued\nB: 2\n",
    "A: 1\nnot a header\nB: 2\n",  # a defect: the stray line starts the body
    "A: 1\nName : spaced\n",  # a space before the colon is not a header
    "Näme: x\nA: 1\n",  # non-ASCII name: not a header
    "A: x\x0cy\u2028z\x85w\n",  # only \r and \n end lines
    "From someone\nA: 1\n\nbody",  # envelope on the first line: dropped
    "A: 1\nFrom someone\nB: 2\n",  # in the middle: dropped
    "A: 1\nFrom someone\n\nbody",  # last header line: first line of the body
    "A: 1\nFrom someone\nstray\n",
    "From a\n",
    "Fromage: cheese\n",
    "A:\tvalue\t \n",
    "A: \n",
    "A:  x\n   y\n\t z\n",
    "A: x\n \n\n",
    "Requires-Dist: torch==2.14.1\nrequires-dist: numpy\nREQUIRES-DIST: x; extra == 'y'\n",
]


@pytest.mark.parametrize("text", CORNERS)
def test_corners(text: str) -> None:
    same(text)


def test_sglang_real_metadata_keeps_its_139_requirements() -> None:
    text = SGLANG.read_text(encoding="utf-8")
    meta = metadata.parse(text)
    requires = meta.get_all("Requires-Dist")
    assert len(requires) == 139
    assert "torch==2.14.1" in requires and "sglang-kernel==0.4.10" in requires
    assert meta.get("Name") == "sglang" and meta.get("Version") == "0.5.23"
    license_ = meta.get("License") or ""
    assert license_.startswith("Apache License\n") and "\n\n   TERMS AND CONDITIONS" in license_
    same(text)


def test_files_read_with_universal_newlines() -> None:
    assert metadata.file_text(b"A: 1\r\n b\r\rbody\r") == "A: 1\n b\n\nbody\n"
    assert metadata.file_text(b"Name: caf\xc3\xa9\n\xff") == "Name: caf\xe9\n\ufffd"
    # importlib.metadata re-indents a folded value by 8 columns before dedenting: a 1-column fold keeps 7.
    assert metadata.parse(metadata.file_text(b"A: 1\r\n b\r\n")).get("A") == "       1\nb"


# Generated header blocks: the line kinds feedparser tells apart, with every line end, in any order.
_VALUE = st.text(alphabet=st.sampled_from(list("ab :\t\x0c\u2028é\\")), max_size=6)
_NAME = st.text(alphabet=st.sampled_from(list("AbZ-_.~!")), max_size=4)
_LINE = st.one_of(
    st.builds(lambda n, v: f"{n}:{v}", _NAME, _VALUE),  # a header (an empty name too)
    st.builds(lambda ws, v: ws + v, st.sampled_from([" ", "\t", "  ", " \t"]), _VALUE),  # continuation
    st.sampled_from(["", "From x", "From ", "no colon", "Name : x", "é: x", "\x0cA: 1"]),
)
_EOL = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def header_blocks(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.tuples(_LINE, _EOL), max_size=10))
    text = "".join(line + eol for line, eol in lines)
    if draw(st.booleans()):
        text += draw(_VALUE)  # a last line without its end
    return text


@settings(derandomize=True, max_examples=1500, deadline=None)
@given(header_blocks())
def test_generated_header_blocks(text: str) -> None:
    same(text)


@settings(derandomize=True, max_examples=800, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aF: \t\r\n\x0co")), max_size=30))
def test_any_text_over_a_small_alphabet(text: str) -> None:
    same(text)


@settings(derandomize=True, max_examples=800, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(" \tab\n\r")), max_size=24))
def test_dedent_is_textwrap_dedent(text: str) -> None:
    assert metadata._dedent(text) == textwrap.dedent(text)


REQUIRES_TXT = """\
torch
einops>=0.6

[triton]
triton>=2.0

[:sys_platform == "linux"]
nvidia-ml-py

[cu13:python_version >= "3.10"]
nvidia-cutlass-dsl-libs-cu13==4.8.1
 # a comment stays a line
foo @ https://example.com/foo.whl

[]
bar @ file:///tmp/bar
[[odd]]
baz
"""


def test_requires_txt_sections() -> None:
    assert metadata.requires_txt(REQUIRES_TXT) == [
        "torch",
        "einops>=0.6",
        'triton>=2.0; extra == "triton"',
        'nvidia-ml-py; sys_platform == "linux"',
        'nvidia-cutlass-dsl-libs-cu13==4.8.1; (python_version >= "3.10") and extra == "cu13"',
        '# a comment stays a line; (python_version >= "3.10") and extra == "cu13"',
        'foo @ https://example.com/foo.whl ; (python_version >= "3.10") and extra == "cu13"',
        "bar @ file:///tmp/bar ",
        'baz; extra == "odd"',
    ]
    assert metadata.requires_txt(REQUIRES_TXT) == list(Distribution._deps_from_requires_text(REQUIRES_TXT))


@settings(derandomize=True, max_examples=800, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("[]:a@ #\n\r\u2028=")), max_size=30))
def test_requires_txt_generated(text: str) -> None:
    assert metadata.requires_txt(text) == list(Distribution._deps_from_requires_text(text))


def test_record_paths() -> None:
    text = 'a/b.py,sha256=x,1\n"c,d.py",,\n\ne/f.so,,\r\n,,\n'
    assert metadata.record_paths(text) == ("a/b.py", "c,d.py", "e/f.so")
    assert metadata.record_paths('a.py,,\n"broken\n') == ("a.py", "broken")


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
    ],
)
def test_direct_url(text: str, url: str | None, editable: str | None) -> None:
    assert metadata.direct_url(text) == metadata.DirectUrl(url, editable)


def _info(site: Path, dirname: str, files: dict[str, str]) -> Path:
    info = site / dirname
    info.mkdir(parents=True)
    for name, content in files.items():
        (info / name).write_text(content)
    return info


def test_scan_survives_odd_folder_names(tmp_path: Path) -> None:
    odd = ("a\nb-1.0.dist-info", "-1.0.dist-info", ".dist-info", "x\\y-2.dist-info", os.fsdecode(b"\xff-3.egg-info"))
    for name in odd:
        (tmp_path / name).mkdir()
    _info(tmp_path, "flash_attn-2.8.3.dist-info", {"METADATA": "Name: flash-attn\nVersion: 2.8.3\n"})
    scan = scan_distributions([str(tmp_path)])
    assert [d.name for d in scan.distributions] == ["flash-attn"]
    assert scan.total == 6 and scan.index["flash-attn"] == "2.8.3" and scan.index["a\nb"] == "1.0"


def test_scan_reads_egg_info_sections_and_pkg_info_requirements(tmp_path: Path) -> None:
    _info(
        tmp_path,
        "flash_attn-2.8.3.egg-info",
        {"PKG-INFO": "Name: flash_attn\nVersion: 2.8.3\n", "requires.txt": REQUIRES_TXT},
    )
    _info(
        tmp_path,
        "quack_kernels-0.6.5.egg-info",
        {
            "PKG-INFO": "Metadata-Version: 2.4\nName: quack-kernels\nVersion: 0.6.5\nRequires-Dist: torch\n",
            "requires.txt": "numpy\n",
        },
    )
    (tmp_path / "flashinfer_python-0.7.2.egg-info").write_text("Name: flashinfer-python\nVersion: 0.7.2\n")  # a file
    scan = scan_distributions([str(tmp_path)])
    fa, fi, quack = sorted(scan.distributions, key=lambda d: d.name)
    assert fa.requires == tuple(metadata.requires_txt(REQUIRES_TXT))
    assert 'triton>=2.0; extra == "triton"' in fa.requires
    assert quack.requires == ("torch",)  # Requires-Dist wins over requires.txt, as in importlib.metadata
    assert (fi.name, fi.version, fi.problem) == ("flashinfer-python", "0.7.2", None)
