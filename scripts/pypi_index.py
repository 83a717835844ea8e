"""Small, stdlib-only access to a Python package index (PyPI): file listings and released metadata files.

- `Index.files(name)`: every file of a project (JSON simple API, PEP 691), with its version, yanked flag,
  Requires-Python and, for wheels, the PEP 658/714 metadata URL.
- `Index.wheel_metadata(f)`: a wheel's METADATA, byte for byte: the index's `.metadata` file where it serves
  one, else the member read out of the wheel with HTTP range requests (the zip's central directory and the one
  member, never the whole wheel).
- `Index.wheel_members(f, names)`: other dist-info members (RECORD, WHEEL, entry_points.txt) the same way.
- `Index.sdist_members(f, wanted)`: an sdist streamed (size-capped), keeping only the members asked for
  (PKG-INFO, `*.egg-info/{PKG-INFO,requires.txt}`, setup.py).

Every request has a timeout. With a cache folder, immutable things (metadata files, archive members) are kept
there; listings are kept only when asked (`listing_max_age`), because a listing changes with every release.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INDEX = "https://pypi.org/simple"
JSON_API = "https://pypi.org/pypi"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
TIMEOUT = 30.0
SDIST_CAP = 64 * 1024 * 1024  # bytes read from one sdist before giving up
MEMBER_CAP = 8 * 1024 * 1024  # the largest archive member kept
USER_AGENT = "fa-doctor-catalog/1 (+scripts/pypi_index.py)"
_SDIST_EXT = (".tar.gz", ".tar.bz2", ".tgz", ".zip")


class IndexError_(Exception):
    """The index could not give what was asked (HTTP error, timeout, malformed answer, size cap)."""


def normalise(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class IndexFile:
    project: str  # normalised name
    filename: str
    url: str
    version: str
    yanked: bool
    yanked_reason: str
    requires_python: str
    sha256: str
    size: int | None
    metadata_url: str  # PEP 658/714 `.metadata` URL when the index announces one, else ""
    metadata_sha256: str = ""  # its sha256 when announced

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @property
    def is_sdist(self) -> bool:
        return self.filename.endswith(_SDIST_EXT)

    @property
    def wheel_tags(self) -> tuple[str, str, str]:
        """(python tag, abi tag, platform tag) of a wheel file name."""
        parts = self.filename[: -len(".whl")].split("-")
        return parts[-3], parts[-2], parts[-1]


def version_of(filename: str, project: str, versions: Iterable[str] = ()) -> str:
    """The version in a wheel or sdist file name (sdist names may hold dashes: match the index's versions)."""
    if filename.endswith(".whl"):
        return filename.split("-")[1]
    stem = filename
    for ext in _SDIST_EXT:
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
            break
    known = sorted(versions, key=len, reverse=True)
    for v in known:
        if stem.endswith("-" + v) and normalise(stem[: -len(v) - 1]) == project:
            return v
    return stem.rpartition("-")[2]


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file through HTTP range requests, in cached blocks."""

    BLOCK = 256 * 1024

    def __init__(self, index: Index, url: str, size: int) -> None:
        self._index, self._url, self._size, self._pos = index, url, size, 0
        self._blocks: dict[int, bytes] = {}
        self.requests = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def _block(self, n: int) -> bytes:
        if n not in self._blocks:
            start = n * self.BLOCK
            end = min(self._size, start + self.BLOCK) - 1
            self.requests += 1
            self._blocks[n] = self._index.get(self._url, headers={"Range": f"bytes={start}-{end}"}, expect=206)
        return self._blocks[n]

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = self._size - self._pos
        size = min(size, self._size - self._pos)
        out = bytearray()
        while size > 0:
            n, off = divmod(self._pos, self.BLOCK)
            chunk = self._block(n)[off : off + size]
            if not chunk:
                break
            out += chunk
            self._pos += len(chunk)
            size -= len(chunk)
        return bytes(out)

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


class _Capped(io.RawIOBase):
    """A stream that refuses to read past `cap` bytes (an sdist read while it downloads)."""

    def __init__(self, raw: io.BufferedIOBase, cap: int, what: str) -> None:
        self._raw, self._cap, self._what, self.count = raw, cap, what, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size if size is not None and size >= 0 else self._cap + 1)
        self.count += len(data)
        if self.count > self._cap:
            raise IndexError_(f"{self._what}: larger than the cap of {self._cap} bytes")
        return data

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


class Index:
    def __init__(
        self,
        url: str = INDEX,
        *,
        cache: Path | None = None,
        timeout: float = TIMEOUT,
        listing_max_age: float = 0.0,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.cache = cache
        self.timeout = timeout
        self.listing_max_age = listing_max_age
        self.log = log or (lambda _msg: None)

    # -- HTTP -------------------------------------------------------------------------------------------------
    def get(self, url: str, *, headers: dict[str, str] | None = None, expect: int = 200) -> bytes:
        req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
        for attempt in range(3):
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    if resp.status != expect:
                        raise IndexError_(f"{url}: HTTP {resp.status}, expected {expect}")
                    return bytes(resp.read())
            except urllib.error.HTTPError as exc:
                if exc.code < 500 or attempt == 2:
                    raise IndexError_(f"{url}: HTTP {exc.code}") from exc
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if attempt == 2:
                    raise IndexError_(f"{url}: {exc}") from exc
            time.sleep(1 + attempt)
        raise AssertionError("unreachable")

    def _cached(self, key: str) -> Path | None:
        return self.cache / key if self.cache else None

    def _store(self, key: str, data: bytes) -> None:
        path = self._cached(key)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".part")
            tmp.write_bytes(data)
            tmp.replace(path)

    # -- listings -----------------------------------------------------------------------------------------------
    def listing(self, name: str) -> dict[str, Any]:
        """The JSON simple API page of a project, as the index sent it."""
        project = normalise(name)
        key = f"simple/{project}.json"
        path = self._cached(key)
        if path and path.exists() and time.time() - path.stat().st_mtime < self.listing_max_age:
            data = path.read_bytes()
        else:
            data = self.get(f"{self.url}/{project}/", headers={"Accept": SIMPLE_JSON})
            self._store(key, data)
        page: Any = json.loads(data)
        if not isinstance(page, dict) or not isinstance(page.get("files"), list):
            raise IndexError_(f"{project}: not a JSON simple API page")
        return page

    def project_json(self, name: str) -> dict[str, Any]:
        """PyPI's JSON API document of a project (info of the newest release, files per release)."""
        data = self.get(f"{JSON_API}/{normalise(name)}/json")
        doc: Any = json.loads(data)
        if not isinstance(doc, dict):
            raise IndexError_(f"{name}: not a JSON API document")
        return doc

    def files(self, name: str) -> list[IndexFile]:
        project = normalise(name)
        page = self.listing(project)
        versions = [str(v) for v in page.get("versions") or []]
        out = []
        for raw in page["files"]:
            fn = str(raw["filename"])
            yanked = raw.get("yanked", False)
            meta = raw.get("core-metadata", raw.get("data-dist-info-metadata", False))
            out.append(
                IndexFile(
                    project=project,
                    filename=fn,
                    url=urllib.parse.urljoin(f"{self.url}/{project}/", str(raw["url"])),
                    version=version_of(fn, project, versions),
                    yanked=bool(yanked),
                    yanked_reason=yanked if isinstance(yanked, str) else "",
                    requires_python=str(raw.get("requires-python") or ""),
                    sha256=str((raw.get("hashes") or {}).get("sha256", "")),
                    size=raw.get("size"),
                    metadata_url=(
                        urllib.parse.urljoin(f"{self.url}/{project}/", str(raw["url"])).split("#")[0] + ".metadata"
                        if meta
                        else ""
                    ),
                    metadata_sha256=str(meta.get("sha256", "")) if isinstance(meta, dict) else "",
                )
            )
        return out

    # -- metadata files -----------------------------------------------------------------------------------------
    def wheel_metadata(self, f: IndexFile) -> bytes:
        """The wheel's `*.dist-info/METADATA`, byte for byte."""
        if not f.is_wheel:
            raise IndexError_(f"{f.filename}: not a wheel")
        key = f"files/{f.filename}/METADATA"
        path = self._cached(key)
        if path and path.exists():
            return path.read_bytes()
        data = b""
        url = f.metadata_url or f.url.split("#")[0] + ".metadata"
        try:
            data = self.get(url)
        except IndexError_:
            if f.metadata_url:
                self.log(f"{f.filename}: the announced .metadata file failed; reading the wheel")
            data = self._wheel_member(f, lambda n: n.endswith(".dist-info/METADATA") and n.count("/") == 1)[1]
        if f.metadata_sha256 and hashlib.sha256(data).hexdigest() != f.metadata_sha256:
            raise IndexError_(f"{f.filename}: the metadata file does not match the sha256 the index announces")
        self._store(key, data)
        return data

    def _wheel_member(self, f: IndexFile, pick: Callable[[str], bool]) -> tuple[str, bytes]:
        members = self.wheel_members(f, pick)
        if len(members) != 1:
            raise IndexError_(f"{f.filename}: {len(members)} members match, expected one")
        return next(iter(members.items()))

    def wheel_members(self, f: IndexFile, pick: Callable[[str], bool]) -> dict[str, bytes]:
        """Members of a remote wheel chosen by `pick(name)`, read with range requests."""
        size = f.size or int(self._head_size(f.url))
        raw = _RangeFile(self, f.url.split("#")[0], size)
        with zipfile.ZipFile(io.BufferedReader(raw, buffer_size=_RangeFile.BLOCK)) as zf:
            out = {}
            for info in zf.infolist():
                if pick(info.filename):
                    if info.file_size > MEMBER_CAP:
                        raise IndexError_(f"{f.filename}!{info.filename}: {info.file_size} bytes, over the cap")
                    out[info.filename] = zf.read(info)
        self.log(f"{f.filename}: {len(out)} member(s) in {raw.requests} range request(s)")
        return out

    def wheel_file(self, f: IndexFile, folder: Path) -> Path:
        """The whole wheel, downloaded once into `folder` (kept outside the repository) and checked against the
        sha256 the index announces; a file already there with that hash is not downloaded again."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f.filename
        if path.exists() and (not f.sha256 or _sha256_of(path) == f.sha256):
            return path
        tmp = path.with_name(path.name + ".part")
        digest = hashlib.sha256()
        req = urllib.request.Request(f.url.split("#")[0], headers={"User-Agent": USER_AGENT})
        with urllib.request.urlopen(req, timeout=self.timeout) as resp, tmp.open("wb") as out:
            while chunk := resp.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if f.sha256 and digest.hexdigest() != f.sha256:
            tmp.unlink()
            raise IndexError_(f"{f.filename}: the download does not match the sha256 the index announces")
        tmp.replace(path)
        self.log(f"{f.filename}: downloaded to {path}")
        return path

    def _head_size(self, url: str) -> int:
        req = urllib.request.Request(url, method="HEAD", headers={"User-Agent": USER_AGENT})
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return int(resp.headers["Content-Length"])

    def sdist_members(self, f: IndexFile, pick: Callable[[str], bool], cap: int = SDIST_CAP) -> dict[str, bytes]:
        """Members of an sdist chosen by `pick(path inside the archive)`, the archive streamed under `cap`."""
        if not f.is_sdist:
            raise IndexError_(f"{f.filename}: not an sdist")
        index_key = f"files/{f.filename}/.members.json"
        path = self._cached(index_key)
        if path and path.exists():
            names = json.loads(path.read_text())
            cached = {n: (self.cache / f"files/{f.filename}/{n}").read_bytes() for n in names}  # type: ignore[operator]
            return {n: b for n, b in cached.items() if pick(n)}
        if f.filename.endswith(".zip"):
            raw = _RangeFile(self, f.url.split("#")[0], f.size or self._head_size(f.url))
            with zipfile.ZipFile(io.BufferedReader(raw, buffer_size=_RangeFile.BLOCK)) as zf:
                out = {i.filename: zf.read(i) for i in zf.infolist() if _keep(i.filename) and i.file_size < MEMBER_CAP}
        else:
            out = {}
            req = urllib.request.Request(f.url.split("#")[0], headers={"User-Agent": USER_AGENT})
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                stream = _Capped(resp, cap, f.filename)
                with tarfile.open(fileobj=io.BufferedReader(stream), mode="r|*") as tf:
                    for member in tf:
                        if member.isfile() and _keep(member.name) and member.size < MEMBER_CAP:
                            fh = tf.extractfile(member)
                            if fh is not None:
                                out[member.name] = fh.read()
            self.log(f"{f.filename}: streamed {stream.count} bytes, kept {len(out)} member(s)")
        for name, data in out.items():
            self._store(f"files/{f.filename}/{name}", data)
        self._store(index_key, json.dumps(sorted(out)).encode())
        return {n: b for n, b in out.items() if pick(n)}


def _keep(name: str) -> bool:
    """What an sdist read keeps (and caches): the top-level PKG-INFO and setup.py, and egg-info metadata."""
    parts = name.split("/")
    if len(parts) == 2 and parts[1] in ("PKG-INFO", "setup.py", "pyproject.toml"):
        return True
    return len(parts) >= 2 and parts[-2].endswith(".egg-info") and parts[-1] in ("PKG-INFO", "requires.txt")


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def pick_artifact(files: Sequence[IndexFile], project: str) -> IndexFile | None:
    """The one file of a release whose metadata stands for it (documented in docs/catalog.md)."""

    def rank(f: IndexFile) -> tuple[int, int, str]:
        if not f.is_wheel:
            return (7 if f.is_sdist else 10, 0, f.filename)
        py, abi, plat = f.wheel_tags
        parts = f.filename[: -len(".whl")].split("-")
        digits = re.match(r"\d*", parts[2]) if len(parts) == 6 else None
        build = -int(digits.group() or 0) if digits else 0  # of several builds, pip takes the highest
        x86 = "manylinux" in plat and "x86_64" in plat
        if project == "torch":
            return (0 if py == "cp311" and x86 else 9, build, f.filename)
        if abi == "none" and plat == "any":
            return (0, build, f.filename)
        if py == "cp311" and x86:
            return (1, build, f.filename)
        if abi == "abi3" and x86:
            return (2, build, f.filename)
        if x86:
            return (3, build, f.filename)
        return (5 if "linux" in plat else 6, build, f.filename)

    candidates = sorted((f for f in files if not f.yanked and (f.is_wheel or f.is_sdist)), key=rank)
    if not candidates or (project == "torch" and rank(candidates[0])[0] != 0):
        return None
    return candidates[0]
