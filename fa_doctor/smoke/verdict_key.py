"""The fingerprint of a smoke verdict: everything running the kernels depends on, read with stat calls and small
reads only (docs/smoke.md, "Verdict cache", lists the parts). Every path comes from the target and is hostile: reads
go through probes/files.py (bounded, regular files only), and nothing here raises."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import fa_doctor
from fa_doctor.catalog import implementations, names
from fa_doctor.model.facts import Facts
from fa_doctor.model.install import Distribution
from fa_doctor.model.machine import GpuDevice
from fa_doctor.probes.files import read
from fa_doctor.smoke import APIS, SmokeResult, SmokeTarget, case_specs

_RECORD_BYTES = 8 << 20  # sglang's RECORD is 0.7 MB; an FA4 runtime's are a few KB each
_MAX_FILES = 20000  # stat calls per distribution; past this the digest says "truncated"
_META_FILES = ("METADATA", "PKG-INFO", "RECORD", "direct_url.json", "INSTALLER", "installed-files.txt")

# What an implementation imports besides its own distributions. `flash_attn` is a namespace two distributions
# fill (FA2 ships a flash_attn/cute of its own: implementations.FA2_SHIPS_CUTE_THROUGH): both are watched for either.
_FA4_RUNTIME = (*names.FA4_RUNTIME, *names.CUDA_BINDINGS)
_EXTRA: Mapping[str, tuple[str, ...]] = {
    "fa2": (names.FLASH_ATTN_4, names.EINOPS),
    "fa4": (names.FLASH_ATTN, *_FA4_RUNTIME),
    "fa4-sglang": (names.SGL_FA4, *_FA4_RUNTIME),
}

# The environment is part of the key, all of it (LD_PRELOAD, PYTHONWARNINGS, CUDA_*, CUTE_DSL_*, ...), except
# these, which a kernel test cannot depend on: the terminal, the shell's own bookkeeping, the session.
IGNORED_VARIABLES = frozenset(
    {
        "_", "PWD", "OLDPWD", "SHLVL", "TERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "COLORTERM", "COLUMNS",
        "LINES", "PS1", "PS2", "PS4", "PROMPT_COMMAND", "HISTFILE", "HISTSIZE", "HISTFILESIZE", "HISTCONTROL",
        "LS_COLORS", "LESS", "LESSOPEN", "LESSCLOSE", "PAGER", "EDITOR", "VISUAL", "MAIL", "OLDPATH",
        "DISPLAY", "XAUTHORITY", "WINDOWID", "DBUS_SESSION_BUS_ADDRESS", "GPG_TTY", "SSH_AUTH_SOCK",
        "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "TMUX", "TMUX_PANE", "STY", "WINDOW",
        "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "GITHUB_STEP_SUMMARY",
        "INVOCATION_ID", "JOURNAL_STREAM", "SYSTEMD_EXEC_PID", "XDG_SESSION_ID", "XDG_VTNR", "XDG_SEAT",
    }
)  # fmt: skip
IGNORED_PREFIXES = ("FA_DOCTOR_", "_FA_DOCTOR", "COMP_", "LC_TERMINAL")


@dataclass(frozen=True, slots=True)
class Fingerprint:
    value: str  # sha256 hex of the parts
    parts: Mapping[str, str]  # part name -> digest

    def changed(self, before: Mapping[str, str]) -> list[str]:
        """The parts that differ from an earlier verdict's (why it was not reused)."""
        return sorted(k for k in {*self.parts, *before} if self.parts.get(k) != before.get(k))


def digest(*parts: object) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(repr(part).encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def stat_key(path: str) -> tuple[object, ...]:
    """(kind, size, mtime_ns, ctime_ns, inode, device), or why there is none. ctime is in it: a file rewritten in
    place with its mtime put back (`touch -d`, `cp -p`) still gets a new ctime, which no user can set."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as exc:
        return ("missing", type(exc).__name__)
    kind = "file" if stat.S_ISREG(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else f"mode {st.st_mode:o}"
    return (kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def _files(paths: Iterable[str]) -> str:
    h = hashlib.sha256()
    for count, path in enumerate(paths):
        if count >= _MAX_FILES:
            h.update(b"truncated")
            break
        h.update(f"{path}\0{stat_key(path)}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _distribution(dist: Distribution) -> str:
    """The RECORD's bytes and the stat of each file it lists; without a RECORD, the stat of its metadata files."""
    meta = _files(os.path.join(dist.metadata_dir, name) for name in _META_FILES)
    base = (dist.normalized, dist.version, dist.location, dist.metadata_dir, dist.editable_dir, meta)
    if dist.files is None:
        return digest(*base, "no RECORD read")
    record = read(os.path.join(dist.metadata_dir, "RECORD"), _RECORD_BYTES)
    record_hash = hashlib.sha256(record.data).hexdigest() if record.data is not None else record.problem
    # An import rewrites a stale .pyc pip compiled (after its source was touched): the source's stat stands for it.
    listed = _files(os.path.join(dist.location, rel) for rel in dist.files if not rel.endswith(".pyc"))
    return digest(*base, record_hash, record.truncated, listed)


def distributions_of(key: str) -> tuple[str, ...]:
    impl = implementations.BY_KEY.get(key)
    return tuple(dict.fromkeys((*(impl.distributions if impl else ()), *_EXTRA.get(key, ()))))


@functools.cache
def _tool(version: str) -> str:
    from fa_doctor.smoke.runner import child_source

    child = hashlib.sha256(child_source().encode()).hexdigest()
    return digest(version, child, json.dumps({api: case_specs(api) for api in APIS}, sort_keys=True))


def compute(
    facts: Facts,
    targets: Sequence[SmokeTarget],
    devices: Sequence[GpuDevice],
    pins: Sequence[str],
    env: Mapping[str, str] | None,
    python_flags: Sequence[str] = (),
) -> Fingerprint:
    """Stat calls and a few small reads only: this runs before every `exec` of an unchanged node."""
    target = facts.target
    real = _real(target.executable)  # a venv link's binary, and its stat: a rebuilt python at the same path
    gpus = [(d.index, d.physical_index, d.name, d.capability, d.memory_mib, d.uuid) for d in devices]
    parts: dict[str, str] = {
        "tool": _tool(fa_doctor.__version__),
        "interpreter": digest(
            target.executable, tuple(target.version), real, stat_key(real), target.prefix, tuple(target.sys_path)
        ),
        "smoke": digest(sorted((t.key, t.module, t.api) for t in targets)),
        # A new `.pth`, module or folder in a search-path folder changes its mtime and ctime.
        "path": digest(*((p, stat_key(p)) for p in target.sys_path)),
        "flags": digest(tuple(python_flags)),
        "cwd": digest(target.cwd, stat_key(target.cwd) if target.cwd else None),
        "gpus": digest(facts.gpus.driver_version, facts.gpus.cuda_driver_version, gpus, list(pins)),
    }
    for name in dict.fromkeys(n for t in targets for n in distributions_of(t.key)):
        copies = facts.scan.named(name)
        parts[f"dist:{name}"] = digest(*(_distribution(d) for d in copies)) if copies else "absent"
    torch = facts.torch
    torch_dist = facts.scan.first(names.TORCH)
    parts["torch"] = digest(
        (torch.version, torch.cuda, torch.hip, torch.cxx11_abi, torch.location) if torch else None,
        _distribution(torch_dist) if torch_dist else None,
        stat_key(os.path.join(torch.location, "version.py")) if torch else None,
    )
    for name, value in (os.environ if env is None else env).items():
        if name not in IGNORED_VARIABLES and not name.startswith(IGNORED_PREFIXES):
            parts[f"env:{name}"] = digest(value)
    return Fingerprint(digest(sorted(parts.items())), parts)


def watched(results: Iterable[SmokeResult]) -> list[str] | None:
    """Every file the children loaded; None when a child did not say (such a verdict is not stored)."""
    results = list(results)
    if not results or any(not r.loaded for r in results):
        return None
    return list(dict.fromkeys(p for r in results for p in r.loaded))


def watch(paths: Iterable[str]) -> dict[str, str]:
    """Each loaded file's identity: where its links lead (a symlinked module's new target) and what is there."""
    reals = {path: _real(path) for path in paths}
    return {path: digest(real, stat_key(real))[:20] for path, real in reals.items()}
