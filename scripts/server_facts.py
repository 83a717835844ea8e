"""What each server release does with FlashAttention, read from its released wheel: the SGLANG, KERNELS and VLLM
tables of fa_doctor/catalog/servers.py (scripts/regen_catalog.py writes them; docs/catalog.md explains them).

- SGLang: every release from 0.4.6 on is downloaded once (tens of MB each, into a folder outside the repository,
  checked against the sha256 the index announces) and its source files are read by
  fa_doctor/probes/sglang_rules.py, the same reader fa-doctor runs on an installed SGLang the catalog does not hold.
- sgl-kernel / sglang-kernel and vLLM: their wheels are hundreds of MB, so only the members needed are read with
  HTTP range requests, each checked against the sha256 its wheel's RECORD gives.
The row builders (`sglang_row`, `kernel_row`, `vllm_row`) are pure: tests/test_server_facts.py runs them on
excerpts of the real files.
"""

from __future__ import annotations

import ast
import base64
import email
import hashlib
import json
import re
import zipfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pypi_index
from packaging.version import Version

from fa_doctor.probes import sglang_rules

SGLANG_FROM = "0.4.6"
KERNELS_FROM = {"sgl-kernel": "0.3.0", "sglang-kernel": "0"}
VLLM_FROM = "0.6.0"
_VLLM_MEMBERS = re.compile(
    r"^vllm/(envs\.py|config/attention\.py|(attention/utils|v1/attention/backends|vllm_flash_attn)/fa_utils\.py"
    r"|vllm_flash_attn/flash_attn_interface\.py|(v1/)?attention/backends/(flash_attn|utils)\.py)$"
)
_KERNEL_MEMBERS = ("sgl_kernel/flash_attn.py", "sgl_kernel/_fa4_interface.py")


def artifact_entry(filename: str, sha256: str) -> str:
    return f"{filename} sha256={sha256}"


# -- pure row builders -----------------------------------------------------------------------------------------


def sglang_row(sources: Mapping[str, str], metadata: bytes) -> dict[str, object]:
    """One SGLANG row: the rules its source files state, its Requires-Python and its kernel requirement."""
    msg = email.message_from_string(metadata.decode("utf-8", "surrogateescape"))
    kernel = [str(r) for r in msg.get_all("Requires-Dist") or () if re.match(r"\s*sgl(ang)?[-_]kernel\b", str(r))]
    return {
        "requires_python": str(msg.get("Requires-Python") or ""),
        "kernel": kernel[0] if kernel else "",
        **sglang_rules.read_rules(sources),
    }


def kernel_row(names: Iterable[str], files: Mapping[str, str]) -> dict[str, object]:
    """One KERNELS row: the module its `_fa4_interface` takes FA4's CuTe kernels from (a copy inside the kernel
    wheel: flash_attn/cute or flash_attn_origin/cute), and what `flash_attn_with_kvcache(..., ver=4)` raises."""
    listed = set(names)
    fa4 = ""
    interface = files.get("sgl_kernel/_fa4_interface.py", "")
    found = re.search(r"^from ([\w.]+)\.flash_fwd import", interface, re.M)
    if found and f"{found.group(1).replace('.', '/')}/__init__.py" in listed:
        fa4 = found.group(1)
    decode = ""
    tree = _parse(files.get("sgl_kernel/flash_attn.py", ""))
    for fn in ast.walk(tree) if tree else ():
        if isinstance(fn, ast.FunctionDef) and fn.name == "flash_attn_with_kvcache":
            for node in ast.walk(fn):
                if isinstance(node, ast.If) and re.fullmatch(r"ver\s*==\s*4", ast.unparse(node.test)):
                    raised = next((s for s in node.body if isinstance(s, ast.Raise)), None)
                    if raised is not None:
                        decode = sglang_rules._error(raised)
    return {"fa4": fa4, "fa4_decode": decode}


def vllm_row(files: Mapping[str, str]) -> dict[str, object]:
    """One VLLM row: whether VLLM_FLASH_ATTN_VERSION is read and the values its own assert takes ("" when none:
    0.13-0.14 copy it into the config with setattr, unchecked), the values of `--attention-config.flash_attn_version`
    (its Literal type), and the reason each FA version gives when it cannot run."""
    envs = files.get("vllm/envs.py", "")
    reads = bool(re.search(r"""^\s*["']VLLM_FLASH_ATTN_VERSION["']\s*:""", envs, re.M))
    config = ""
    attention = files.get("vllm/config/attention.py", "")
    literal = re.search(r"^\s*flash_attn_version:\s*Literal\[([\d,\s]+)\]", attention, re.M)
    if literal:
        config = " ".join(v.strip() for v in literal.group(1).split(","))
    env_accepts = ""
    for text in files.values():
        found = re.search(r"assert\s+(?:envs\.)?VLLM_FLASH_ATTN_VERSION\s+in\s+[\[(]([\d,\s]+)[\])]", text)
        if found:
            env_accepts = " ".join(v.strip() for v in found.group(1).split(",") if v.strip())
    supported: dict[str, str] = {}
    interface = files.get("vllm/vllm_flash_attn/flash_attn_interface.py", "")
    for found in re.finditer(r"""["'](FA(\d) is only supported on[^"']*)["']""", interface):
        supported.setdefault(found.group(2), found.group(1))
    return {
        "env": "VLLM_FLASH_ATTN_VERSION" if reads else "",
        "env_accepts": env_accepts,
        "config": config,
        "unsupported": dict(sorted(supported.items())),
    }


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text) if text else None
    except SyntaxError:
        return None


# -- reading the wheels ----------------------------------------------------------------------------------------


def _record_hashes(record: bytes) -> dict[str, str]:
    out = {}
    for line in record.decode("utf-8", "replace").splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[1].startswith("sha256="):
            out[parts[0]] = parts[1][len("sha256=") :]
    return out


def _checked(name: str, data: bytes, hashes: Mapping[str, str]) -> str:
    """A member's text, after checking it against its wheel's RECORD."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    if name in hashes and hashes[name] != digest:
        raise pypi_index.IndexError_(f"{name}: its sha256 does not match the wheel's RECORD")
    return data.decode("utf-8", "replace")


def read_sglang_wheel(path: Path) -> tuple[dict[str, str], bytes]:
    """(the source files the rules read, METADATA) of a downloaded SGLang wheel."""
    sources: dict[str, str] = {}
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        for name in names:
            if not name.endswith(".py") or not name.startswith("sglang/") or "/cute/" in name:
                continue
            data = zf.read(name)
            if sglang_rules.SOURCE_FILES.match(name) or any(v.encode() in data for v in sglang_rules.KNOWN_VARS):
                sources[name] = data.decode("utf-8", "replace")
        return sources, zf.read(meta)


def _range_read(
    index: pypi_index.Index, f: pypi_index.IndexFile, pick: Callable[[str], bool]
) -> tuple[list[str], dict[str, str]]:
    """(every member name, the picked members' text) of a remote wheel, each checked against its RECORD; kept
    in the index's cache folder (a released file never changes)."""
    cached = index.cache / "files" / f.filename / ".wheel-members.json" if index.cache else None
    if cached is not None and cached.exists():
        saved = json.loads(cached.read_text(encoding="utf-8"))
        if all(n in saved["members"] for n in saved["names"] if pick(n)):
            return saved["names"], {n: t for n, t in saved["members"].items() if pick(n)}
    names: list[str] = []

    def keep(name: str) -> bool:
        names.append(name)
        return pick(name) or (name.endswith(".dist-info/RECORD") and name.count("/") == 1)

    members = index.wheel_members(f, keep)
    record = next((data for name, data in members.items() if name.endswith("/RECORD")), b"")
    hashes = _record_hashes(record)
    texts = {n: _checked(n, d, hashes) for n, d in members.items() if not n.endswith("/RECORD")}
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps({"names": names, "members": texts}), encoding="utf-8")
    return names, texts


def _releases(index: pypi_index.Index, project: str, since: str) -> list[tuple[str, pypi_index.IndexFile]]:
    by_version: dict[str, list[pypi_index.IndexFile]] = {}
    for f in index.files(project):
        by_version.setdefault(f.version, []).append(f)
    out = []
    for version, files in by_version.items():
        if Version(version) < Version(since) or all(f.yanked for f in files):
            continue
        art = pypi_index.pick_artifact(files, project)  # the same artifact the metadata tables read
        if art is not None and art.is_wheel:
            out.append((version, art))
    return sorted(out, key=lambda p: Version(p[0]))


def read_servers(
    index: pypi_index.Index, wheels: Path, jobs: int, log: Callable[[str], None]
) -> dict[str, dict[str, dict[str, object]]]:
    """The SGLANG, KERNELS and VLLM tables, read from the index's released wheels."""

    def sglang(item: tuple[str, pypi_index.IndexFile]) -> tuple[str, dict[str, object]]:
        version, art = item
        sources, metadata = read_sglang_wheel(index.wheel_file(art, wheels))
        return version, {"wheel": artifact_entry(art.filename, art.sha256), **sglang_row(sources, metadata)}

    def kernel(item: tuple[str, str, pypi_index.IndexFile]) -> tuple[str, str, dict[str, object]]:
        project, version, art = item
        names, files = _range_read(index, art, lambda n: n in _KERNEL_MEMBERS)
        return project, version, {"wheel": artifact_entry(art.filename, art.sha256), **kernel_row(names, files)}

    def vllm(item: tuple[str, pypi_index.IndexFile]) -> tuple[str, dict[str, object]]:
        version, art = item
        _, files = _range_read(index, art, lambda n: bool(_VLLM_MEMBERS.match(n)))
        return version, {"wheel": artifact_entry(art.filename, art.sha256), **vllm_row(files)}

    kernels = [(p, v, a) for p, since in KERNELS_FROM.items() for v, a in _releases(index, p, since)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        sg = dict(pool.map(sglang, _releases(index, "sglang", SGLANG_FROM)))
        log(f"sglang: {len(sg)} releases read")
        kr: dict[str, dict[str, object]] = {}
        for project, version, row in pool.map(kernel, kernels):
            kr.setdefault(project, {})[version] = row
        log(f"kernels: {len(kernels)} releases read")
        vl = dict(pool.map(vllm, _releases(index, "vllm", VLLM_FROM)))
        log(f"vllm: {len(vl)} releases read")
    return {"SGLANG": sg, "KERNELS": kr, "VLLM": vl}


# -- servers.py --------------------------------------------------------------------------------------------------

SERVERS_HEADER = (
    '"""Per-release server facts read from the released wheels (SGLang, its kernels, vLLM); pure data."""\n'
)
_WIDTH = 120  # ruff's line-length: the file is written as `ruff format` would leave it


def _lit(s: str) -> str:
    if '"' in s and "'" not in s:
        return repr(s)
    body = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{body}"'


def _flat(value: object) -> str:
    if isinstance(value, str):
        return _lit(value)
    if isinstance(value, tuple):
        inner = ", ".join(_flat(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    raise TypeError(f"{type(value).__name__} is not a table value")


def _py(value: object, indent: int, head: int) -> str:
    """`value` as Python source; `head` is how much of its first line is already written."""
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        rows = [f"{pad}    {_lit(k)}: {_py(v, indent + 4, indent + 4 + len(_lit(k)) + 2)},\n" for k, v in value.items()]
        return "{\n" + "".join(rows) + pad + "}"
    if isinstance(value, tuple) and value:
        flat = _flat(value)
        if head + len(flat) + 1 <= _WIDTH:
            return flat
        rows = [f"{pad}    {_py(v, indent + 4, indent + 4)},\n" for v in value]
        return "(\n" + "".join(rows) + pad + ")"
    return _flat(value) if isinstance(value, tuple) else _lit(str(value))


def _sorted(table: Mapping[str, object]) -> dict[str, object]:
    return {k: table[k] for k in sorted(table, key=Version)}


_RELEASE_KEYS = ("wheel", "requires_python", "kernel")


def intern(
    sglang: Mapping[str, Mapping[str, object]],
) -> tuple[dict[str, object], dict[str, object], dict[str, object]]:
    """(SGLANG_CHOICES, SGLANG_RULES, SGLANG): each distinct list of backend names, and each distinct set of the
    other rules, once, under the first release that has it; a release row names them."""
    choices: dict[object, str] = {}
    rules: dict[object, str] = {}
    rows: dict[str, object] = {}
    for version in sorted(sglang, key=Version):
        row = sglang[version]
        rest = {k: v for k, v in row.items() if k not in (*_RELEASE_KEYS, "choices")}
        key = tuple(rest.items())
        rows[version] = {
            **{k: row[k] for k in _RELEASE_KEYS},
            "choices": choices.setdefault(row["choices"], version),
            "rules": rules.setdefault(key, version),
        }
    return {v: c for c, v in choices.items()}, {v: dict(k) for k, v in rules.items()}, rows  # type: ignore[arg-type]


def expand(
    choices: Mapping[str, object], rules: Mapping[str, object], rows: Mapping[str, Mapping[str, object]]
) -> dict[str, object]:
    """SGLANG rows with their choices and rules in place (what `intern` was given)."""
    out: dict[str, object] = {}
    for version, row in rows.items():
        named = rules[str(row["rules"])]
        assert isinstance(named, dict)
        out[version] = {**{k: row[k] for k in _RELEASE_KEYS}, "choices": choices[str(row["choices"])], **named}
    return out


def render_servers(tables: Mapping[str, object], generated_on: str, command: str) -> str:
    sglang = tables["SGLANG"]
    assert isinstance(sglang, dict)
    choices, rules, rows = intern(sglang)
    kernels = tables["KERNELS"]
    assert isinstance(kernels, dict)
    kernel_rows = {k: _sorted(v) for k, v in sorted(kernels.items())}
    parts = [
        f"# Generated by `{command}` on {generated_on}. Do not edit by hand: rerun the command.\n",
        '# What each table is and where it comes from: docs/catalog.md ("servers.py").\n',
        "# ruff: noqa: E501\n",
        SERVERS_HEADER,
        "\nfrom __future__ import annotations\n\nfrom typing import Any\n\n",
        f"GENERATED_ON: str = {_lit(generated_on)}\n",
        f"SGLANG_CHOICES: dict[str, tuple[str, ...]] = {_py(choices, 0, 0)}\n",
        f"SGLANG_RULES: dict[str, dict[str, Any]] = {_py(rules, 0, 0)}\n",
        f"SGLANG: dict[str, dict[str, str]] = {_py(rows, 0, 0)}\n",
        f"KERNELS: dict[str, dict[str, dict[str, Any]]] = {_py(kernel_rows, 0, 0)}\n",
        f"VLLM: dict[str, dict[str, Any]] = {_py(_sorted(tables['VLLM']), 0, 0)}\n",  # type: ignore[arg-type]
        f"INSTALLS: dict[str, tuple[tuple[str, ...], ...]] = {_py(_sorted(tables['INSTALLS']), 0, 0)}\n",  # type: ignore[arg-type]
        f"INSTALLS_SOURCE: str = {_lit(str(tables['INSTALLS_SOURCE']))}\n",
    ]
    return "".join(parts)
