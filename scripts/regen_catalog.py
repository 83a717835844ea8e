"""Regenerate fa_doctor/catalog/releases.py and servers.py from the package index: python scripts/regen_catalog.py

servers.py (scripts/server_facts.py, scripts/resolve_installs.py) holds what each SGLang, sgl-kernel/sglang-kernel
and vLLM release does with FlashAttention, read from its released wheel (SGLang wheels downloaded whole into
--wheels, outside the repository), and pip's verdict on every install fa-doctor prints next to each SGLang release.

What it reads (metadata only, never a whole wheel): the JSON simple API page of every project below, the
METADATA of one wheel per release of the FA_STACK packages (the index's `.metadata` file, or the member read
out of the wheel with range requests), the newest flash-attn sdist's setup.py (FA2_WHEEL_URL), the torch
channels on download.pytorch.org when reachable, and flash-attention's publish.yml matrix from saved copies
(`--fa2-publish-yml VERSION=PATH`). Tables that cannot be re-read are kept from the current releases.py, and
their *_SOURCE says so. docs/catalog.md explains every table.

The table-building functions (`versions_tables`, `requires_entry`, `fa2_matrix`, `fa2_wheel_url`, `render`) are
pure, so tests/test_regen_catalog.py runs them on the corpus without a network.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import email
import hashlib
import json
import re
import sys
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pypi_index

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fa_doctor" / "catalog" / "releases.py"
SERVERS_OUT = ROOT / "fa_doctor" / "catalog" / "servers.py"
WHEELS = Path("/tmp/fa-doctor-wheels")  # downloaded server wheels: tens of MB each, never in the repository
COMMAND = "python scripts/regen_catalog.py"

# Packages whose Requires-Dist is read, release by release, and from which version on.
FA_STACK_READ: dict[str, str] = {
    "sglang": "0.4.0",
    "vllm": "0.6.0",
    "sglang-kernel": "0",
    "sgl-kernel": "0",
    "flash-attn-4": "0",
    "nvidia-cutlass-dsl": "0",
    "nvidia-cutlass-dsl-libs-base": "0",
    "nvidia-cutlass-dsl-libs-core": "0",
    "nvidia-cutlass-dsl-libs-cu12": "0",
    "nvidia-cutlass-dsl-libs-cu13": "0",
    "quack-kernels": "0",
    "apache-tvm-ffi": "0",
    "torch-c-dlpack-ext": "0",
    "flashinfer-python": "0.2",
    "torch": "2.4",
}
# Packages listed in VERSIONS only.
VERSIONS_ONLY = ("flash-attn", "flash-attn-3", "transformers", "torchvision", "torchaudio")
# A requirement line is kept when it names one of these (or an nvidia-cutlass-dsl* package).
FA_STACK: frozenset[str] = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "sglang",
        "sglang-kernel",
        "sgl-kernel",
        "flash-attn",
        "flash-attn-3",
        "flash-attn-4",
        "vllm-flash-attn",
        "quack-kernels",
        "apache-tvm-ffi",
        "torch-c-dlpack-ext",
        "cuda-bindings",
        "cuda-python",
        "flashinfer-python",
        "flashinfer-cubin",
        "xformers",
        "nvidia-cuda-runtime-cu12",
        "nvidia-cuda-runtime-cu13",
        # torch >= 2.11 on PyPI names its CUDA through these instead of nvidia-cuda-runtime-cu1x:
        "nvidia-cuda-runtime",
        "cuda-toolkit",
        "triton",
        "einops",
    }
)
TORCH_WHL = "https://download.pytorch.org/whl"
TORCH_CHANNEL_CANDIDATES = ("cu118", "cu121", "cu124", "cu126", "cu128", "cu129", "cu130", "cu132")


@dataclass
class Tables:
    generated_on: str
    index: str = pypi_index.INDEX
    versions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    yanked: dict[str, tuple[str, ...]] = field(default_factory=dict)
    requires: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    requires_python: dict[str, dict[str, str]] = field(default_factory=dict)
    sources: dict[str, dict[str, str]] = field(default_factory=dict)
    torch_channels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    torch_channels_source: str = ""
    fa2_wheels: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    fa2_wheel_url: str = ""
    fa2_wheel_name: str = ""
    fa2_wheels_source: str = ""


# -- pure table builders ---------------------------------------------------------------------------------------


def _vkey(v: str) -> tuple[int, Version | str]:
    try:
        return (1, Version(v))
    except InvalidVersion:
        return (0, v)


def sort_versions(versions: Iterable[str]) -> list[str]:
    return sorted(set(versions), key=_vkey)


def versions_tables(
    listing: Mapping[str, Sequence[Mapping[str, object]]],
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """(VERSIONS, YANKED) from a listing {name: [{"filename", "version", "yanked"}, ...]}.

    A version is yanked when every file of it is yanked (PEP 592); otherwise it is listed.
    """
    versions: dict[str, tuple[str, ...]] = {}
    yanked: dict[str, tuple[str, ...]] = {}
    for name in sorted(listing):
        live: set[str] = set()
        seen: set[str] = set()
        for f in listing[name]:
            v = str(f["version"])
            seen.add(v)
            if not f["yanked"]:
                live.add(v)
        versions[name] = tuple(sort_versions(live))
        yanked[name] = tuple(sort_versions(seen - live))
    return versions, yanked


def requirement_name(line: str) -> str:
    try:
        return canonicalize_name(Requirement(line).name)
    except InvalidRequirement:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
        return canonicalize_name(m.group(1)) if m else ""


def in_stack(name: str) -> bool:
    return name in FA_STACK or name.startswith("nvidia-cutlass-dsl")


def requires_entry(metadata: bytes) -> tuple[tuple[str, ...], str]:
    """(Requires-Dist lines naming FA_STACK packages, verbatim and in order; Requires-Python or "").

    The headers are read as importlib.metadata reads them (email.message_from_string, compat32).
    """
    msg = email.message_from_string(metadata.decode("utf-8", "surrogateescape"))
    lines = tuple(str(v) for v in msg.get_all("Requires-Dist") or () if in_stack(requirement_name(str(v))))
    return lines, str(msg.get("Requires-Python") or "")


def source_entry(artifact: str, metadata: bytes) -> str:
    return f"{artifact} sha256={hashlib.sha256(metadata).hexdigest()}"


def _mm(torch_version: str) -> str:
    """A torch version as flash-attn's wheel names carry it (MATRIX_TORCH_VERSION: major.minor)."""
    return ".".join(torch_version.split(".")[:2])


def _matrix_item(item: Mapping[str, object]) -> str:
    return " ".join(f"{k}={_mm(str(v)) if k == 'torch-version' else v}" for k, v in sorted(item.items()))


def fa2_matrix(doc: Mapping[str, object]) -> dict[str, tuple[str, ...]]:
    """The build matrix of flash-attention's publish.yml (already parsed from YAML) as FA2_WHEELS values.

    torch is major.minor (the wheel name's `torch2.8`), cuda, python and cxx11abi as the matrix lists them,
    platform from the runner (`ubuntu-*-arm` builds linux_aarch64), exclude/include as `key=value` strings.
    """
    jobs = doc.get("jobs")
    if not isinstance(jobs, dict):
        raise ValueError("publish.yml: no jobs")
    for job in jobs.values():
        matrix = (job.get("strategy") or {}).get("matrix") if isinstance(job, dict) else None
        if isinstance(matrix, dict) and "torch-version" in matrix:
            break
    else:
        raise ValueError("publish.yml: no job with a torch-version matrix")

    def strs(key: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(str(v) for v in matrix.get(key) or ()))

    out = {
        "torch": tuple(dict.fromkeys(_mm(v) for v in strs("torch-version"))),
        "cuda": strs("cuda-version"),
        "python": strs("python-version"),
        "cxx11abi": strs("cxx11_abi"),
        "platform": tuple(dict.fromkeys("linux_aarch64" if o.endswith("-arm") else "linux_x86_64" for o in strs("os"))),
        "exclude": tuple(_matrix_item(i) for i in matrix.get("exclude") or () if isinstance(i, dict)),
    }
    include = tuple(_matrix_item(i) for i in matrix.get("include") or () if isinstance(i, dict))
    if include:
        out["include"] = include
    return out


def fa2_wheel_url(setup_py: str) -> tuple[str, str]:
    """(BASE_WHEEL_URL, the CUDA wheel_filename f-string as a format template) of flash-attn's setup.py."""
    tree = ast.parse(setup_py)
    consts: dict[str, str] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            consts[node.targets[0].id] = node.value.value
    name_tpl = ""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "wheel_filename"
            and isinstance(node.value, ast.JoinedStr)
        ):
            parts = []
            for piece in node.value.values:
                if isinstance(piece, ast.Constant):
                    parts.append(str(piece.value))
                elif isinstance(piece, ast.FormattedValue) and isinstance(piece.value, ast.Name):
                    ident = piece.value.id
                    parts.append(consts[ident] if ident in consts else "{" + ident + "}")
            if "+cu" in "".join(parts):
                name_tpl = "".join(parts)
    base = consts.get("BASE_WHEEL_URL", "")
    if not base or not name_tpl:
        raise ValueError("setup.py: BASE_WHEEL_URL or the CUDA wheel_filename f-string not found")
    return base, name_tpl


# -- rendering ---------------------------------------------------------------------------------------------------


def _lit(s: str) -> str:
    """A string literal as ruff format writes it (double quotes unless that needs more escapes)."""
    if '"' in s and "'" not in s:
        return repr(s)
    body = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{body}"'


def _tuple(items: Sequence[str], indent: int) -> str:
    pad = " " * indent
    if not items:
        return "()"
    if len(items) == 1:
        one = f"({_lit(items[0])},)"
        if indent + len(one) < 100:
            return one
    inner = "".join(f"{pad}    {_lit(i)},\n" for i in items)
    return f"(\n{inner}{pad})"


def _dict(d: Mapping[str, object], indent: int, order: Sequence[str] | None = None) -> str:
    pad = " " * indent
    if not d:
        return "{}"
    keys = order if order is not None else list(d)
    out = ["{\n"]
    for k in keys:
        v = d[k]
        if isinstance(v, tuple):
            rv = _tuple(v, indent + 4)
        elif isinstance(v, dict):
            rv = _dict(v, indent + 4, _key_order(v))
        else:
            rv = _lit(str(v))
        out.append(f"{pad}    {_lit(k)}: {rv},\n")
    out.append(f"{pad}}}")
    return "".join(out)


def _key_order(d: Mapping[str, object]) -> list[str]:
    keys = list(d)
    fa2 = ["torch", "cuda", "python", "cxx11abi", "platform", "exclude", "include"]
    if set(keys) <= set(fa2):
        return [k for k in fa2 if k in d]
    if all(_vkey(k)[0] for k in keys):
        return sort_versions(keys)
    return sorted(keys)


def render(t: Tables) -> str:
    def table(name: str, annotation: str, d: Mapping[str, object]) -> str:
        return f"{name}: {annotation} = {_dict(d, 0, _key_order(d))}\n"

    parts = [
        f"# Generated by `{COMMAND}` on {t.generated_on}. Do not edit by hand: rerun the command.\n",
        "# What each table is and where it comes from: docs/catalog.md.\n",
        "# ruff: noqa: E501\n",
        '"""Release facts read from the package index (PyPI) and the release artifacts; pure data."""\n',
        "\n",
        "from __future__ import annotations\n",
        "\n",
        f"GENERATED_ON: str = {_lit(t.generated_on)}\n",
        f"INDEX: str = {_lit(t.index)}\n",
        table("VERSIONS", "dict[str, tuple[str, ...]]", t.versions),
        table("YANKED", "dict[str, tuple[str, ...]]", t.yanked),
        table("REQUIRES", "dict[str, dict[str, tuple[str, ...]]]", t.requires),
        table("REQUIRES_PYTHON", "dict[str, dict[str, str]]", t.requires_python),
        table("SOURCES", "dict[str, dict[str, str]]", t.sources),
        table("TORCH_CHANNELS", "dict[str, tuple[str, ...]]", t.torch_channels),
        f"TORCH_CHANNELS_SOURCE: str = {_lit(t.torch_channels_source)}\n",
        table("FA2_WHEELS", "dict[str, dict[str, tuple[str, ...]]]", t.fa2_wheels),
        f"FA2_WHEEL_URL: str = {_lit(t.fa2_wheel_url)}\n",
        f"FA2_WHEEL_NAME: str = {_lit(t.fa2_wheel_name)}\n",
        f"FA2_WHEELS_SOURCE: str = {_lit(t.fa2_wheels_source)}\n",
    ]
    return "".join(parts)


def load_previous(path: Path) -> dict[str, object]:
    """The tables of an existing releases.py, read without importing it."""
    if not path.exists():
        return {}
    out: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = ast.literal_eval(node.value)
    return out


# -- network ---------------------------------------------------------------------------------------------------


def compact_listing(files: Sequence[pypi_index.IndexFile]) -> list[dict[str, object]]:
    """What VERSIONS and YANKED are built from: each (version, yanked) pair once, PEP 440 ordered."""
    pairs = {(f.version, f.yanked) for f in files}
    return [{"version": v, "yanked": y} for v, y in sorted(pairs, key=lambda p: (_vkey(p[0]), p[1]))]


def dump_listing(listing: Mapping[str, Sequence[Mapping[str, object]]]) -> str:
    lines = [f"  {json.dumps(n)}: {json.dumps(listing[n], separators=(',', ':'))}" for n in sorted(listing)]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def read_torch_channels(timeout: float, log: Callable[[str], None]) -> dict[str, tuple[str, ...]] | None:
    found: dict[str, set[str]] = {}
    for channel in TORCH_CHANNEL_CANDIDATES:
        url = f"{TORCH_WHL}/{channel}/torch/"
        try:
            req = urllib.request.Request(url, headers={"User-Agent": pypi_index.USER_AGENT})
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                page = resp.read().decode("utf-8", "replace")
        except Exception as exc:  # any failure means: not re-read
            log(f"torch channels: {url}: {exc}")
            return None
        for m in re.finditer(r"torch-(\d+)\.(\d+)\.\d+(?:\.post\d+)?%2B" + channel, page):
            found.setdefault(f"{m.group(1)}.{m.group(2)}", set()).add(channel)
    order = {c: i for i, c in enumerate(TORCH_CHANNEL_CANDIDATES)}
    return {k: tuple(sorted(v, key=order.__getitem__)) for k, v in found.items()}


def read_release_metadata(
    index: pypi_index.Index, files: Sequence[pypi_index.IndexFile], project: str
) -> tuple[pypi_index.IndexFile, bytes] | None:
    art = pypi_index.pick_artifact(files, project)
    if art is None:
        return None
    if art.is_wheel:
        return art, index.wheel_metadata(art)
    members = index.sdist_members(art, lambda n: n.count("/") == 1 and n.endswith("/PKG-INFO"))
    return (art, next(iter(members.values()))) if members else None


def build(args: argparse.Namespace) -> Tables:
    def log(msg: str) -> None:
        if args.verbose:
            print(msg, file=sys.stderr)

    index = pypi_index.Index(cache=args.cache, timeout=args.timeout, listing_max_age=args.listing_max_age, log=log)
    today = args.date or datetime.date.today().isoformat()
    prev = load_previous(args.out)
    t = Tables(generated_on=today)
    names = sorted(set(FA_STACK_READ) | set(VERSIONS_ONLY))
    files: dict[str, list[pypi_index.IndexFile]] = {}
    for name in names:
        try:
            files[name] = index.files(name)
        except pypi_index.IndexError_ as exc:
            if "HTTP 404" not in str(exc):
                raise
            log(f"{name}: not on the index")
    listing = {n: compact_listing(fs) for n, fs in files.items()}
    if args.save_listing:
        args.save_listing.write_text(dump_listing(listing), encoding="utf-8")
    t.versions, t.yanked = versions_tables(listing)

    jobs = []
    for name, minimum in FA_STACK_READ.items():
        by_version: dict[str, list[pypi_index.IndexFile]] = {}
        for f in files.get(name, ()):
            by_version.setdefault(f.version, []).append(f)
        for v in t.versions.get(name, ()):
            if _vkey(v) >= _vkey(minimum):
                jobs.append((name, v, by_version[v]))
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda j: (j[0], j[1], read_release_metadata(index, j[2], j[0])), jobs))
    for name, v, got in results:
        if got is None:
            log(f"{name} {v}: no artifact to read")
            continue
        art, data = got
        lines, rp = requires_entry(data)
        t.requires.setdefault(name, {})[v] = lines
        t.requires_python.setdefault(name, {})[v] = rp
        t.sources.setdefault(name, {})[v] = source_entry(art.filename, data)

    channels = read_torch_channels(args.timeout, log) if not args.offline_torch else None
    if channels is not None:
        t.torch_channels = channels
        t.torch_channels_source = (
            f"read from {TORCH_WHL}/<channel>/torch/ for {', '.join(TORCH_CHANNEL_CANDIDATES)} on {today}"
        )
    else:
        t.torch_channels = dict(prev.get("TORCH_CHANNELS") or {})  # type: ignore[call-overload]
        old = str(prev.get("TORCH_CHANNELS_SOURCE") or "no earlier source")
        base = re.sub(r"^not re-read on \S+ \([^)]*\); kept from the previous file: ", "", old)
        t.torch_channels_source = (
            f"not re-read on {today} ({TORCH_WHL} unreachable); kept from the previous file: {base}"
        )

    fa_sdists = [f for f in files.get("flash-attn", ()) if f.is_sdist and not f.yanked]
    newest = max(fa_sdists, key=lambda f: _vkey(f.version))
    setup = index.sdist_members(newest, lambda n: n.count("/") == 1 and n.endswith("/setup.py"))
    t.fa2_wheel_url, t.fa2_wheel_name = fa2_wheel_url(next(iter(setup.values())).decode("utf-8"))
    url_note = (
        f"FA2_WHEEL_URL (BASE_WHEEL_URL) and FA2_WHEEL_NAME (get_wheel_url's CUDA wheel_filename) from setup.py "
        f"of {newest.filename} (sdist sha256={newest.sha256})"
    )
    if args.fa2_publish_yml:
        import yaml  # type: ignore[import-untyped]  # the test extra; only with --fa2-publish-yml

        for spec in args.fa2_publish_yml:
            version, _, path = spec.partition("=")
            t.fa2_wheels[version] = fa2_matrix(yaml.safe_load(Path(path).read_text(encoding="utf-8")))
        tags = sort_versions(t.fa2_wheels)
        t.fa2_wheels_source = (
            f"strategy.matrix of .github/workflows/publish.yml in Dao-AILab/flash-attention at tags "
            f"{', '.join('v' + v for v in tags)} (read on {today}); {url_note}"
        )
    else:
        t.fa2_wheels = dict(prev.get("FA2_WHEELS") or {})  # type: ignore[call-overload]
        old = str(prev.get("FA2_WHEELS_SOURCE") or "")
        kept = old.split("; FA2_WHEEL_URL")[0]
        t.fa2_wheels_source = f"{kept}; {url_note}" if kept else url_note
    return t


def build_servers(args: argparse.Namespace, tables: Tables) -> dict[str, object]:
    """servers.py's tables: read from the released wheels, or kept from the current file (--keep-servers); the
    printed installs resolved with pip's resolver, or kept (--keep-installs)."""
    import server_facts

    def log(msg: str) -> None:
        if args.verbose:
            print(msg, file=sys.stderr)

    prev = load_previous(args.servers_out)
    if args.keep_servers and prev:
        out: dict[str, object] = {
            "SGLANG": server_facts.expand(prev["SGLANG_CHOICES"], prev["SGLANG_RULES"], prev["SGLANG"]),  # type: ignore[arg-type]
            "KERNELS": prev["KERNELS"],
            "VLLM": prev["VLLM"],
        }
    else:
        index = pypi_index.Index(cache=args.cache, timeout=args.timeout, log=log)
        out = dict(server_facts.read_servers(index, args.wheels, args.jobs, log))
    out["INSTALLS"] = prev.get("INSTALLS") or {}
    out["INSTALLS_SOURCE"] = prev.get("INSTALLS_SOURCE") or "not resolved"
    if not args.keep_installs:
        # The planner that prints the installs reads the new tables: write them first.
        args.servers_out.write_text(server_facts.render_servers(out, tables.generated_on, COMMAND), encoding="utf-8")
        import resolve_installs

        out["INSTALLS"], out["INSTALLS_SOURCE"] = resolve_installs.resolve_all(out, tables, args, log)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--servers-out", type=Path, default=SERVERS_OUT)
    ap.add_argument("--wheels", type=Path, default=WHEELS, help="where server wheels are downloaded (not the repo)")
    ap.add_argument("--keep-servers", action="store_true", help="keep servers.py's release tables, do not re-read")
    ap.add_argument("--keep-installs", action="store_true", help="keep the recorded install resolutions")
    ap.add_argument("--cache", type=Path, default=None, help="cache folder for metadata files (outside the repo)")
    ap.add_argument("--listing-max-age", type=float, default=0.0, help="reuse cached listings younger than this (s)")
    ap.add_argument("--timeout", type=float, default=pypi_index.TIMEOUT)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--date", help="the GENERATED_ON date (default: today)")
    ap.add_argument("--save-listing", type=Path, help="also write the compact index listing here (JSON)")
    ap.add_argument("--offline-torch", action="store_true", help="do not try download.pytorch.org")
    ap.add_argument(
        "--fa2-publish-yml",
        action="append",
        metavar="VERSION=PATH",
        help="a saved copy of flash-attention's publish.yml at tag vVERSION (repeat per release)",
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    tables = build(args)
    text = render(tables)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(
        f"{args.out}: {sum(len(v) for v in tables.versions.values())} versions, "
        f"{sum(len(v) for v in tables.requires.values())} releases with requirements",
        file=sys.stderr,
    )
    import server_facts

    servers = build_servers(args, tables)
    args.servers_out.write_text(server_facts.render_servers(servers, tables.generated_on, COMMAND), encoding="utf-8")
    print(f"{args.servers_out}: {len(servers['SGLANG'])} SGLang, {len(servers['VLLM'])} vLLM releases", file=sys.stderr)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
