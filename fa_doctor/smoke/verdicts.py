"""The verdict cache's store: passing smoke results under `$XDG_CACHE_HOME/fa-doctor/verdicts/<fingerprint>.json`,
reused while their fingerprint (verdict_key.py) holds; docs/smoke.md ("Verdict cache", storage) gives the rules."""

from __future__ import annotations

import json
import os
import secrets
import stat
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from typing import Any

import fa_doctor
from fa_doctor.smoke import CaseResult, SmokeResult, cache_folder

SCHEMA = "fa-doctor.verdict/1"
_MAX_BYTES = 8 << 20  # eight GPUs x six implementations ~200 KB, plus the identity of every loaded file
_KEEP = 64  # verdicts kept; older ones are removed when a new one is stored
_STALE_TMP = 3600.0
_HEX = frozenset("0123456789abcdef")
_O_NOFOLLOW_CLOEXEC = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_O_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _O_NOFOLLOW_CLOEXEC
_TYPES: dict[str, Any] = {"str": (str,), "bool": (bool,), "int": (int,), "num": (int, float)}
# The fields of a stored result and of its cases, each of its kind (`_check`).
_RESULT = dict.fromkeys(("key", "module", "api", "stderr_tail", "stdout_tail", "python"), "str")
_RESULT |= dict.fromkeys(("signal", "module_file", "flash_attn_origin", "visible_devices", "cache_dir"), "str?")
_RESULT |= dict.fromkeys(("device_name", "last_phase"), "str?")
_RESULT |= {"returncode": "int?", "warnings": "strs", "timeout": "num", "environment": "map"}
_CASE = dict.fromkeys(("name", "function", "dtype"), "str") | {"head_dim": "int", "causal": "bool", "error": "str?"}
_CASE |= {"max_abs_err": "num?", "tolerance": "num", "seconds": "num?"}


@dataclass(frozen=True, slots=True)
class Proven:
    """When and where a verdict was proven by running the kernels."""

    at: str  # ISO 8601, UTC
    host: str
    tool_version: str
    gpus: tuple[str, ...]  # "0 NVIDIA H200 GPU-..."


@dataclass(frozen=True, slots=True)
class Verdict:
    fingerprint: str
    parts: Mapping[str, str]
    proven: Proven
    results: tuple[tuple[str, SmokeResult], ...]  # (device UUID or index, result), in run order
    watch: Mapping[str, str]  # every file the children loaded -> its identity when it was proven


@contextmanager
def _folder(env: Mapping[str, str] | None, create: bool) -> Iterator[int]:
    """A descriptor of the verdicts folder, every component fa-doctor owns checked (and created 0700): OSError
    when one is not a folder fa-doctor may use (a link, another user's, a file)."""
    path = cache_folder(os.environ if env is None else env, "verdicts")
    tool = os.path.dirname(path)
    base = os.path.dirname(tool)
    if create:
        os.makedirs(base, mode=0o700, exist_ok=True)  # the user's own cache folder: may be a link they made
    fd = os.open(base, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        for name in (os.path.basename(tool), os.path.basename(path)):
            if create:
                with suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=fd)
            try:
                child = os.open(name, _O_DIR, dir_fd=fd)
            except OSError as exc:  # ELOOP: a link; ENOTDIR: a file
                raise OSError(f"{os.path.join(base, name)}: {exc.strerror or exc}") from exc
            os.close(fd)
            fd = child
            st = os.fstat(fd)
            if st.st_uid != os.geteuid():
                raise OSError(f"{name} is owned by uid {st.st_uid}, not by this user")
            if st.st_mode & 0o077:
                os.fchmod(fd, 0o700)  # ours: made private (an older fa-doctor or a umask left it open)
        yield fd
    finally:
        os.close(fd)


def load(fingerprint: str, env: Mapping[str, str] | None = None) -> Verdict | None:
    """The stored verdict for this fingerprint, or None (none, refused, or not one to trust)."""
    if not _valid_hex(fingerprint):
        return None
    try:
        with _folder(env, create=False) as folder:
            raw = _read(folder, fingerprint + ".json")
    except (OSError, ValueError):
        return None
    return parse(raw, fingerprint)


def _read(folder: int, name: str) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | _O_NOFOLLOW_CLOEXEC | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > _MAX_BYTES:
            return None
        data = fh.read(_MAX_BYTES + 1)
    return data if len(data) <= _MAX_BYTES else None


def store(verdict: Verdict, env: Mapping[str, str] | None = None) -> str | None:
    """Write a passing verdict atomically; None when stored, else why not (the run goes on without it)."""
    if not _valid_hex(verdict.fingerprint) or not all(r.status == "passed" for _, r in verdict.results):
        return "only passing verdicts are stored"
    data = json.dumps(_to_doc(verdict), ensure_ascii=True, allow_nan=False).encode()
    if len(data) > _MAX_BYTES:
        return f"verdict of {len(data)} bytes is over the {_MAX_BYTES} byte limit"
    try:
        with _folder(env, create=True) as folder:
            tmp = f".{verdict.fingerprint[:16]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW_CLOEXEC, 0o600, dir_fd=folder)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, verdict.fingerprint + ".json", src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                _unlink(folder, tmp)
                raise
            _prune(folder, keep=verdict.fingerprint + ".json")
    except (OSError, ValueError) as exc:
        return f"verdict not stored: {exc}"
    return None


def forget(fingerprint: str, env: Mapping[str, str] | None = None) -> None:
    """A run with this fingerprint failed: its passing verdict, if any, must not be reused."""
    if _valid_hex(fingerprint):
        with suppress(OSError, ValueError), _folder(env, create=False) as folder:
            _unlink(folder, fingerprint + ".json")


def latest(env: Mapping[str, str] | None = None) -> list[Verdict]:
    """The stored verdicts, newest first (to say which part changed when none matches)."""
    try:
        with _folder(env, create=False) as folder:
            found = [parse(_read(folder, name), name[: -len(".json")]) for name, _ in _entries(folder)[:_KEEP]]
    except (OSError, ValueError):
        return []
    return [verdict for verdict in found if verdict is not None]


def _entries(folder: int) -> list[tuple[str, float]]:
    found = []
    for name in os.listdir(folder):
        if name.endswith(".json") and _valid_hex(name[: -len(".json")]):
            with suppress(OSError):
                found.append((name, os.stat(name, dir_fd=folder, follow_symlinks=False).st_mtime))
    return sorted(found, key=lambda nm: -nm[1])


def _prune(folder: int, keep: str) -> None:
    for name, _ in _entries(folder)[_KEEP:]:
        if name != keep:
            _unlink(folder, name)
    now = time.time()
    for name in os.listdir(folder):
        if name.startswith(".") and name.endswith(".tmp"):
            with suppress(OSError):
                if now - os.stat(name, dir_fd=folder, follow_symlinks=False).st_mtime > _STALE_TMP:
                    _unlink(folder, name)


def _unlink(folder: int, name: str) -> None:
    with suppress(OSError):
        os.unlink(name, dir_fd=folder)


def _valid_hex(value: str) -> bool:
    return len(value) == 64 and set(value) <= _HEX


# ---- the file format: written by us, read as untrusted ---------------------------------------------------
def _to_doc(v: Verdict) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "tool_version": fa_doctor.__version__,
        "fingerprint": v.fingerprint,
        "parts": dict(v.parts),
        "proven": asdict(v.proven),
        "watch": dict(v.watch),
        "results": [{"device": device, "result": r.to_dict()} for device, r in v.results],
    }


def parse(raw: bytes | None, fingerprint: str) -> Verdict | None:
    try:
        doc = json.loads(raw) if raw is not None else None
        want = {"schema": SCHEMA, "tool_version": fa_doctor.__version__, "fingerprint": fingerprint}
        if not isinstance(doc, dict) or any(doc.get(k) != v for k, v in want.items()):
            return None
        p = doc["proven"]
        at, host, tool = (_check(p[k], "str") for k in ("at", "host", "tool_version"))
        proven = Proven(at, host, tool, _check(p["gpus"], "strs"))
        results = tuple((_check(item["device"], "str"), _result(item["result"])) for item in doc["results"])
        if not results:
            return None
        return Verdict(fingerprint, _check(doc["parts"], "map"), proven, results, _check(doc["watch"], "map"))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError):
        return None


def _check(value: Any, kind: str) -> Any:
    """An untrusted JSON value of this kind ("str", "num", "int", "bool", "strs", "map"; "?": or null), or
    TypeError. A number is never a bool and becomes a float; a list of strings becomes a tuple."""
    if value is None and kind.endswith("?"):
        return None
    kind = kind.rstrip("?")
    if kind == "strs" and isinstance(value, list):
        return tuple(_check(v, "str") for v in value)
    if kind == "map" and isinstance(value, dict):
        return {_check(k, "str"): _check(v, "str") for k, v in value.items()}
    if isinstance(value, _TYPES.get(kind, ())) and (kind in ("str", "bool") or not isinstance(value, bool)):
        return float(value) if kind == "num" else value
    raise TypeError(f"not a {kind}")


def _result(d: Mapping[str, Any]) -> SmokeResult:
    cases = d["cases"]
    if d["status"] != "passed" or d["error"] is not None or not cases or any(c["passed"] is not True for c in cases):
        raise ValueError("only passing results, of passing cases, are reused")
    cases = tuple(CaseResult(passed=True, **{k: _check(c[k], kind) for k, kind in _CASE.items()}) for c in cases)
    phases = {_check(k, "str"): _check(v, "num") for k, v in d["phases"].items()}
    fields = {k: _check(d[k], kind) for k, kind in _RESULT.items()}
    return SmokeResult(status="passed", phases=phases, cases=cases, **fields)
