"""fa_doctor.pep440 against packaging, the reference: every specifier of every real metadata file we hold, tested
against versions in every form (plain releases, which take the fast path, and pre-, post-, dev-, local and epoch
versions, which go to packaging), and generated plain releases against generated specifiers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from fa_doctor import pep440, requirements
from fa_doctor.probes import metadata

CORPUS = Path(__file__).resolve().parent / "corpus" / "metadata"
CANDIDATES = (
    "0", "0.1", "0.1.11", "0.2", "1", "1.0", "1.0.0", "2.9.1", "2.10", "4.6.2", "4.6.2.0", "4.8.1", "12.8.90",
    "2.11.0+cu130", "2.9.0+cpu", "4.0.0b36", "4.6.0.dev0", "1.0.post1", "1!1.0", "v1.0", "1.0rc1", " 1.0 ",
    "4.6", "0.5.3", "999999999.0", "not a version", "", "2.11.0+CU130", "1.0+", "1.0+a..b", "1.0+a_b-c.d",
    "2.14.1+cu129", "1.0+local+more", "1.0+café", "0.1.15.post2", "1.0.post0", "1.0.0.post1", "4.6.2.post1+cu13",
    "1.0-1", "1.0post1", "1.0.POST1", "1.0.post", "0.1.11.post0",
)  # fmt: skip


def _specifiers() -> list[str]:
    found: set[str] = set()
    for path in sorted(CORPUS.rglob("*")):
        if not path.is_file() or not (path.name in ("METADATA", "PKG-INFO") or path.name.endswith(".metadata")):
            continue
        headers = metadata.parse(metadata.file_text(path.read_bytes())).headers
        for line in (value for name, value in headers if name.lower() == "requires-dist"):
            req = requirements.parse(line)
            if req is not None:
                found.add(req.specifier)
    return sorted(found)


SPECIFIERS = _specifiers()


def reference(specifier: str, version: str) -> bool | None:
    try:
        return SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


def test_the_corpus_has_specifiers() -> None:
    assert len(SPECIFIERS) > 300 and "" in SPECIFIERS and any("," in s for s in SPECIFIERS)


@pytest.mark.parametrize("version", CANDIDATES)
def test_every_corpus_specifier_as_packaging(version: str) -> None:
    wrong = [s for s in SPECIFIERS if pep440.contains(s, version) != reference(s, version)]
    assert not wrong, wrong[:10]


def test_odd_specifiers_as_packaging() -> None:
    odd = [">=4 .6", ">= 4.6", ">=4.6,", ",>=4.6", "==4.*", "~=4.6", "===4.6.2", ">=4.6;", "=>4.6", "<4.6.2.0.0"]
    for specifier in odd:
        for version in CANDIDATES:
            assert pep440.contains(specifier, version) == reference(specifier, version), (specifier, version)


RELEASES = st.lists(st.integers(0, 12), min_size=1, max_size=5).map(lambda parts: ".".join(map(str, parts)))
CLAUSES = st.tuples(st.sampled_from(["==", "!=", "<=", ">=", "<", ">"]), RELEASES).map("".join)


LOCALS = st.from_regex(r"\A[a-zA-Z0-9]{1,4}(?:[-_.][a-zA-Z0-9]{1,3}){0,2}\Z")


@given(
    version=RELEASES,
    post=st.one_of(st.none(), st.integers(0, 3)),
    local=st.one_of(st.none(), LOCALS),
    clauses=st.lists(CLAUSES, max_size=3),
)
def test_generated_releases_as_packaging(version: str, post: int | None, local: str | None, clauses: list[str]) -> None:
    version = f"{version}.post{post}" if post is not None else version
    version = f"{version}+{local}" if local else version
    specifier = ",".join(clauses)
    assert pep440.contains(specifier, version) == reference(specifier, version)


@given(a=RELEASES, b=st.one_of(RELEASES, st.sampled_from(CANDIDATES)))
def test_same_as_packaging(a: str, b: str) -> None:
    try:
        expected: bool | None = Version(a) == Version(b)
    except InvalidVersion:
        expected = None
    assert pep440.same(a, b) == expected and pep440.same(b, a) == expected


def test_the_healthy_static_check_loads_neither_packaging_nor_dataclasses(tmp_path: Path) -> None:
    """What keeps `check --no-smoke` near the interpreter's start-up (benchmarks/static_floor.py): a healthy FA4
    install is judged without importing packaging, dataclasses or inspect."""
    import subprocess

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fakeenv import make_env

    fenv = make_env(tmp_path)
    fenv.torch()
    fenv.fa4()
    code = (
        "import sys, io, contextlib\n"
        "from fa_doctor.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(sys.argv[1:])\n    except SystemExit as e:\n        code = e.code\n"
        "print(code, sorted(m for m in ('packaging', 'dataclasses', 'inspect', 'typer', 'click') if m in sys.modules))"
    )
    args = ["check", "--no-smoke", "--json", "--python", fenv.python]
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
    assert done.stdout.split(" ", 1) == ["0", "[]\n"], done.stdout + done.stderr
