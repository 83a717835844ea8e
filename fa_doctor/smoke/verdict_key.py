"""The fingerprint of a smoke verdict: everything the result of running the kernels depends on.

A verdict is reused only while every part below is unchanged (docs/smoke.md, "Verdict cache"):

- `interpreter`: the target's executable, version, real binary and its stat, prefix and search path;
  `flags`: the interpreter options the server runs with (exec: `-I`, `-E`, `-S`, `-W error`, ...);
  `path`: the identity of every search-path folder (a new `.pth`, `sitecustomize.py`, module or folder changes
  it); `cwd`: the working folder and its identity;
- `dist:<name>`: each distribution the selected implementations import, as its RECORD plus the stat of every
  file it lists (smoke/fingerprint.py);
- `torch`: the build facts and the stat of its metadata and version.py;
- `env:<NAME>`: every environment variable, but the terminal and session ones in IGNORED_VARIABLES;
- `gpus`: the driver and CUDA driver versions, each smoke-tested device's model, capability, memory and UUID,
  and the CUDA_VISIBLE_DEVICES value it is pinned with;
- `smoke`: the implementations, modules and calling conventions; `tool`: fa-doctor's version, the child's
  source and the cases.

After a run, the verdict also records every file the children loaded (module files, extension modules and
each shared object mapped into them) with its identity (realpath, size, mtime, ctime, inode, device): a reuse
re-checks each one (`watch()`), so an extension rebuilt in place, an upgraded CUDA library wheel or a module
whose symlink now points elsewhere runs the kernels again. When in doubt, rerun: a verdict whose children did
not say what they loaded is never stored.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import fa_doctor
from fa_doctor.catalog import implementations, names
from fa_doctor.model.facts import Facts
from fa_doctor.model.machine import GpuDevice
from fa_doctor.smoke import APIS, SmokeResult, SmokeTarget, case_specs
from fa_doctor.smoke import fingerprint as fp

# What an implementation imports besides its own distributions. `flash_attn` is a namespace two distributions
# fill (FA2 up to 2.8.3.post1 ships a flash_attn/cute of its own): both are watched for either.
_FA4_RUNTIME = (*names.FA4_RUNTIME, *names.CUDA_BINDINGS)
_EXTRA: Mapping[str, tuple[str, ...]] = {
    "fa2": (names.FLASH_ATTN_4, "einops"),
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


def distributions_of(key: str) -> tuple[str, ...]:
    impl = implementations.BY_KEY.get(key)
    own = impl.distributions if impl is not None else ()
    return tuple(dict.fromkeys((*own, *_EXTRA.get(key, ()))))


@functools.cache
def _tool(version: str) -> str:
    from fa_doctor.smoke.runner import child_source

    child = hashlib.sha256(child_source().encode()).hexdigest()
    return fp.digest(version, child, json.dumps({api: case_specs(api) for api in APIS}, sort_keys=True))


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
    parts: dict[str, str] = {
        "tool": _tool(fa_doctor.__version__),
        "interpreter": fp.interpreter(target.executable, target.version, target.prefix, target.sys_path),
        "smoke": fp.digest(sorted((t.key, t.module, t.api) for t in targets)),
        "path": fp.folders(target.sys_path),
        "flags": fp.digest(tuple(python_flags)),
        "cwd": fp.digest(target.cwd, fp.stat_key(target.cwd) if target.cwd else None),
        "gpus": fp.digest(
            facts.gpus.driver_version,
            facts.gpus.cuda_driver_version,
            [(d.index, d.physical_index, d.name, d.capability, d.memory_mib, d.uuid) for d in devices],
            list(pins),
        ),
    }
    wanted = dict.fromkeys(n for t in targets for n in distributions_of(t.key))
    for name in wanted:
        copies = facts.scan.named(name)
        parts[f"dist:{name}"] = fp.digest(*(fp.distribution(d) for d in copies)) if copies else "absent"
    torch = facts.torch
    torch_dist = facts.scan.first(names.TORCH)
    parts["torch"] = fp.digest(
        (torch.version, torch.cuda, torch.hip, torch.cxx11_abi, torch.location) if torch else None,
        fp.distribution(torch_dist) if torch_dist else None,
        fp.stat_key(os.path.join(torch.location, "version.py")) if torch else None,
    )
    for name, value in (os.environ if env is None else env).items():
        if name not in IGNORED_VARIABLES and not name.startswith(IGNORED_PREFIXES):
            parts[f"env:{name}"] = fp.digest(value)
    return Fingerprint(fp.digest(sorted(parts.items())), parts)


def watched(results: Iterable[SmokeResult]) -> list[str] | None:
    """Every file the children loaded (module files, extension modules, mapped shared objects); None when a
    child did not say (an older child, a list cut short): such a verdict is not stored."""
    results = list(results)
    if not results or any(not r.loaded for r in results):
        return None
    return list(dict.fromkeys(p for r in results for p in r.loaded))


def watch(paths: Iterable[str]) -> dict[str, str]:
    return {path: fp.identity(path) for path in paths}
