"""Every install fa-doctor can print next to an SGLang release, resolved with pip's resolver against the index: the
INSTALLS table of fa_doctor/catalog/servers.py (scripts/regen_catalog.py runs this after writing the release
tables; docs/catalog.md shows the counts per release).

For each SGLang release in the catalog and each torch an SGLang release pins, on the oldest Python the release
admits, fa-doctor's own planner (diagnose/plan) is asked what it prints for a missing FA3 kernel, a missing FA4,
and SGLang's unmet torch pin, on hand-made facts; each distinct `pip install` is then resolved with
`pip install --dry-run --ignore-installed --report` for that Python on manylinux x86-64, wheels only (no
compiler), its constraints in a file as the printed command has them. The result is recorded under the install's
digest (server_rules.install_key): "ok", "no: <pip's reason>" (fa-doctor then never prints it), or
"unchecked: <why>" (an index this machine cannot reach; a release wheel on GitHub).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

PYTHONS = ("3.10", "3.11", "3.12")
PLATFORMS = (
    "linux_x86_64",
    "manylinux1_x86_64",
    "manylinux2010_x86_64",
    "manylinux2014_x86_64",
    *(f"manylinux_2_{n}_x86_64" for n in range(5, 40)),
)
TIMEOUT = 600


@dataclass(frozen=True)
class Printed:
    server: str  # the SGLang release
    torch: str
    python: str
    what: str  # which remedy: fa3-sgl, fa4, fa4-sglang, keep-torch, move-torch
    requirements: tuple[str, ...]
    options: tuple[str, ...]
    constraints: tuple[str, ...]

    @property
    def key(self) -> str:
        from fa_doctor.catalog import server_rules

        return server_rules.install_key(self.requirements, self.options, self.constraints, self.python)

    @property
    def label(self) -> str:
        return f"{self.what} torch {self.torch} py{self.python}: {' '.join(self.requirements)}"


def _python_for(version: str, torch: str, requires_python: Mapping[str, Mapping[str, str]]) -> str | None:
    for py in PYTHONS:
        specs = [requires_python.get("sglang", {}).get(version, ""), requires_python.get("torch", {}).get(torch, "")]
        if all(SpecifierSet(s).contains(py) for s in specs if s):
            return py
    return None


def _facts(server: str, torch: str, python: str) -> Any:
    """What `check` would gather on a machine with this SGLang and torch (installed with --no-deps), no FA
    package, one Hopper GPU."""
    from fa_doctor.catalog import ecosystem, releases
    from fa_doctor.model.facts import Facts
    from fa_doctor.model.install import Distribution, DistributionScan
    from fa_doctor.model.machine import GpuDevice, GpuFacts, TargetFacts, TorchBuild
    from fa_doctor.probes.sglang_source import read_sglang

    site = "/opt/venv/lib/site-packages"
    exe = "/opt/venv/bin/python"
    major, minor = (int(p) for p in python.split("."))
    target = TargetFacts(exe, exe, (major, minor, 0), "cpython", "/opt/venv", (site,), "x86_64", "glibc 2.35", True,
                         False)  # fmt: skip
    cuda = ecosystem.pypi_torch_cuda(torch) or 12
    dists = (
        Distribution(
            "sglang",
            "sglang",
            server,
            site,
            f"{site}/sglang-{server}.dist-info",
            releases.REQUIRES["sglang"][server],
            ("sglang",),
        ),
        Distribution("torch", "torch", torch, site, f"{site}/torch-{torch}.dist-info", (), ("torch",)),
    )
    scan = DistributionScan(dists, len(dists), (site,), {d.normalized: d.version for d in dists})
    gpus = GpuFacts("test", (GpuDevice(0, 0, "H100", (9, 0), 81920, None),), "580.0", "13.0", None, ())
    build = TorchBuild(f"{torch}+cu{cuda}0", f"{cuda}.{8 if cuda == 12 else 0}", None, True, f"{site}/torch")
    sglang = read_sglang(dists[0], "SGLANG_FLASHATTENTION_VERSION", scan)
    return Facts(target, gpus, build, scan, {}, sglang)


def printed(server: str, torch: str, python: str) -> list[Printed]:
    """The `pip install` lines fa-doctor prints for this set-up."""
    from fa_doctor.diagnose.plan import recipes
    from fa_doctor.model import intents
    from fa_doctor.model.actions import PipInstall

    facts = _facts(server, torch, python)
    remedies: list[tuple[str, Any]] = []
    remedies += [("fa3-sgl", r) for r in recipes.reinstall(facts, "fa3-sgl")]
    keys = ["fa4-sglang" if facts.sglang.fa4_vendored else "fa4"]
    if facts.sglang.rules.fa4_switch:  # SGLANG_INKLING_FA4_USE_PIP=1: pip's flash-attn-4 instead
        keys.append("fa4")
    for key in keys if 4 in facts.sglang.accepted_versions else ():
        remedies += [(key, r) for r in recipes.reinstall(facts, key)]
    # An unconditional torch pin fa-doctor reports as unmet (0.4.x-0.5.2 pin torch under their `srt` extra only).
    pin = re.search(r"^torch==([^\s;,]+)$", "\n".join(facts.scan.first("sglang").requires), re.M)
    if pin and pin.group(1) != torch:
        unmet = ((f"torch=={pin.group(1)}", torch),)
        for r in recipes.satisfy(facts, intents.Satisfy("sglang", unmet)):
            remedies.append(("move-torch" if r.replaces_torch else "keep-torch", r))
    out = []
    for what, remedy in remedies:
        for action in remedy.actions:
            if isinstance(action, PipInstall):
                out.append(
                    Printed(server, torch, python, what, action.requirements, action.options, action.constraints)
                )
    return out


def resolve(item: Printed, cache: Path) -> str:
    """pip's verdict on one printed install: "ok", "no: <reason>" or "unchecked: <why>"."""
    if any(r.startswith(("http://", "https://", "./", "/")) for r in item.requirements):
        return "unchecked: a file or URL, not resolved against the index"
    options = [o for o in item.options if o not in ("--force-reinstall", "--no-build-isolation", "--no-cache-dir")]
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text("".join(f"{c}\n" for c in item.constraints), encoding="utf-8")
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
               str(report), "--python-version", item.python, "--implementation", "cp", "--only-binary=:all:",
               *(a for p in PLATFORMS for a in ("--platform", p)), "--cache-dir", str(cache), "--no-input",
               "--disable-pip-version-check", *options, *item.requirements, "-c", str(constraints)]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull  # the machine's pip.conf (extra indexes, constraint files) stays out
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env, check=False)
        except subprocess.TimeoutExpired:
            return f"unchecked: pip did not finish in {TIMEOUT} s"
        if proc.returncode == 0 and report.exists():
            return "ok"
        errors = [ln.strip() for ln in proc.stderr.splitlines() if ln.startswith("ERROR:") or "conflict" in ln]
        lines = proc.stderr.strip().splitlines()
        text = " ".join(errors) or (lines[-1] if lines else f"pip exited with {proc.returncode}")
        reason = re.sub(r"\s+", " ", text).replace("ERROR: ", "")[:300]
        if re.search(r"Could not fetch URL|connection|Name or service not known|timed out", reason, re.I):
            return f"unchecked: {reason}"
        return f"no: {reason}"


def resolve_all(
    servers: Mapping[str, Any], tables: Any, args: argparse.Namespace, log: Callable[[str], None]
) -> tuple[dict[str, tuple[tuple[str, ...], ...]], str]:
    """(INSTALLS, INSTALLS_SOURCE): every printed install of every SGLang release x torch, resolved once."""
    import importlib

    from fa_doctor.catalog import ecosystem, releases, server_rules
    from fa_doctor.catalog import servers as catalog_servers

    for module in (releases, catalog_servers):  # the files just written, not those loaded before
        importlib.reload(module)
    catalog_servers.INSTALLS = {}  # what the planner prints, before any recorded verdict hides one
    for cached in (server_rules._resolved, server_rules.sglang, ecosystem.pypi_torch_cuda, ecosystem._requirements):
        cached.cache_clear()
    sglang = list(servers["SGLANG"])
    torches = sorted(
        {m.group(1) for v in sglang for line in tables.requires["sglang"].get(v, ())
         if (m := re.match(r"torch==([\d.]+)(\s*;\s*extra\s*==\s*\"srt\")?$", line))},
        key=Version,
    )  # fmt: skip
    items: list[Printed] = []
    for version in sglang:
        for torch in torches:
            py = _python_for(version, torch, tables.requires_python)
            if py is not None:
                items += printed(version, torch, py)
    unique = {i.key: i for i in items}
    log(f"installs: {len(items)} printed, {len(unique)} distinct; resolving")
    cache = args.wheels / "pip-cache"
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        verdicts = dict(zip(unique, pool.map(lambda i: resolve(i, cache), unique.values()), strict=True))
    table: dict[str, list[tuple[str, ...]]] = {}
    for item in items:
        row = (item.key, verdicts[item.key], item.label)
        if row not in table.setdefault(item.server, []):
            table[item.server].append(row)
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=False)
    source = (
        f"{pip.stdout.split(' from ')[0]} --dry-run --ignore-installed --only-binary=:all: against {tables.index} "
        f"on {tables.generated_on}: torch {', '.join(torches)}, each on the oldest of Python "
        f"{', '.join(PYTHONS)} the SGLang release and torch admit, manylinux x86-64"
    )
    return {k: tuple(sorted(v)) for k, v in table.items()}, source


def summary(installs: Mapping[str, tuple[tuple[str, ...], ...]]) -> dict[str, dict[str, int]]:
    """Per SGLang release: how many printed installs were resolved (ok), refused (no), not checked."""
    out = {}
    for server, rows in installs.items():
        counts = {"ok": 0, "no": 0, "unchecked": 0}
        for _, status, _ in rows:
            counts[status.split(":", 1)[0]] += 1
        out[server] = counts
    return out


if __name__ == "__main__":  # a summary of the committed table: python scripts/resolve_installs.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from fa_doctor.catalog import servers as committed

    print(json.dumps(summary(committed.INSTALLS), indent=1))
