"""A fake target for `fix --apply`: a `python` whose `-m pip` really changes a site folder (dist-info, RECORD,
package files) the way pip does, reports `--dry-run --report` as pip does, and fails on demand; and a `git`.

Behaviour lines (`key=value`, in `<bin>/behaviour`): `pip-version`, `dry` (network, conflict, hang, pulls:SPEC
adds an unrequested item to the report), `install` (fail-before, fail-after, fail-on:NAME, hang, enospc, sigkill-self,
spawn: start a grandchild that sleeps, spawn-late: the same after removing the old copies), `uninstall` (fail).
Every call is logged to `<bin>/calls.log` with its working directory.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from pathlib import Path

from fa_doctor.fix.apply import ApplyResult

SITE_KEY = "site"

FAKE_PYTHON = r"""#!{python}
import json, os, re, shutil, signal, subprocess, sys, time
here = os.path.dirname(os.path.abspath(sys.argv[0]))
args = sys.argv[1:]
def mode(key):
    try:
        for line in open(os.path.join(here, "behaviour")):
            k, _, v = line.rstrip("\n").partition("=")
            if k == key:
                return v
    except OSError:
        pass
    return ""
with open(os.path.join(here, "calls.log"), "a") as log:
    log.write(json.dumps({{"argv": args, "cwd": os.getcwd(), "max_jobs": os.environ.get("MAX_JOBS"),
                          "pid": os.getpid()}}) + "\n")
site = mode("site")
def norm(n): return re.sub(r"[-_.]+", "-", n).lower()
def dists(name):
    out = []
    for e in os.listdir(site):
        if e.endswith(".dist-info") and norm(e[:-10].split("-", 1)[0]) == norm(name):
            out.append(os.path.join(site, e))
    return out
def remove(name):
    for d in dists(name):
        for row in open(os.path.join(d, "RECORD")):
            p = os.path.join(site, row.split(",")[0])
            if os.path.isfile(p): os.unlink(p)
        shutil.rmtree(d, ignore_errors=True)
def write(name, version, partial=False):
    pkg = norm(name).replace("-", "_")
    os.makedirs(os.path.join(site, pkg), exist_ok=True)
    files = {{pkg + "/__init__.py": "VERSION = %r\n" % version, pkg + "/new_in_%s.py" % version.replace(".", "_"): ""}}
    for rel, text in files.items():
        open(os.path.join(site, rel), "w").write(text)
        if partial: return
    info = "%s-%s.dist-info" % (pkg, version)
    os.makedirs(os.path.join(site, info))
    meta = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
    open(os.path.join(site, info, "METADATA"), "w").write(meta)
    rows = list(files) + [info + "/METADATA", info + "/RECORD"]
    open(os.path.join(site, info, "RECORD"), "w").write("".join(r + ",,\n" for r in rows))
if args[:2] != ["-m", "pip"]:
    sys.exit(0)
if "--version" in args:
    if mode("pip") == "missing":
        print("No module named pip", file=sys.stderr); sys.exit(1)
    print("pip %s from /fake/pip (python 3.11)" % (mode("pip-version") or "24.0")); sys.exit(0)
VALUED = {{"--report", "--timeout", "--retries", "-c", "--index-url", "--extra-index-url", "--find-links",
          "--target", "--no-binary"}}
reqs, i = [], 3
while i < len(args):
    if args[i] in VALUED: i += 2; continue
    if args[i].startswith("-"): i += 1; continue
    reqs.append(args[i]); i += 1
items = []
for r in reqs:
    if r.startswith("./"):
        setup = os.path.join(os.getcwd(), r, "setup.py")
        exec(open(setup).read()) if os.path.exists(setup) else None
        items.append(("flash-attn-3", "3.0.0", True))
    else:
        n, _, v = r.partition("==")
        items.append((n, v or "1.0", True))
if args[2] == "install" and "--dry-run" in args:
    m = mode("dry")
    if m == "network":
        print("WARNING: Retrying after connection broken by 'NewConnectionError('Failed to establish a new "
              "connection: [Errno 101] Network is unreachable')'", file=sys.stderr); sys.exit(1)
    if m == "conflict":
        print("ERROR: ResolutionImpossible: conflicting dependencies", file=sys.stderr); sys.exit(1)
    if m == "hang": time.sleep(60)
    if m.startswith("pulls:"):
        n, _, v = m[6:].partition("==")
        items.append((n, v, False))
    report = args[args.index("--report") + 1]
    rows = [{{"metadata": {{"name": n, "version": v}}, "requested": q}} for n, v, q in items]
    json.dump({{"version": "1", "install": rows}}, open(report, "w"))
    sys.exit(0)
if args[2] == "install":
    m = mode("install")
    if m.startswith("fail-on:"):  # only the install of this name fails (after changing files)
        m = "fail-after" if m[8:] in [n for n, _, _ in items] else ""
    if m == "fail-before":
        print("ERROR: Failed building wheel", file=sys.stderr); sys.exit(1)
    if m == "hang": time.sleep(60)
    if m == "spawn-late":  # the old copies removed, then it hangs: a half-changed site when it is killed
        for n, _, _ in items: remove(n)
        m = "spawn"
    if m == "spawn":
        kid = subprocess.Popen(["sleep", "300"])
        open(os.path.join(here, "spawned.tmp"), "w").write("%d %d" % (os.getpid(), kid.pid))
        os.rename(os.path.join(here, "spawned.tmp"), os.path.join(here, "spawned"))
        time.sleep(300)
    print("Installing collected packages: " + ", ".join(n for n, _, _ in items))
    for k, (n, v, _) in enumerate(items):
        remove(n)
        if m == "fail-after" and k == len(items) - 1:
            write(n, v, partial=True)
            print("ERROR: could not write", file=sys.stderr); sys.exit(1)
        if m == "enospc":
            print("OSError: [Errno 28] No space left on device", file=sys.stderr); sys.exit(1)
        if m == "sigkill-self":
            os.kill(os.getpid(), signal.SIGKILL)
        write(n, v)
    print("Successfully installed"); sys.exit(0)
if args[2] == "uninstall":
    if mode("uninstall") == "fail":
        sys.exit(3)
    for n in reqs[1:] if reqs and reqs[0] == "-y" else reqs:
        remove(n)
    print("Successfully uninstalled"); sys.exit(0)
"""

FAKE_GIT = r"""#!{python}
import os, sys
here = os.path.dirname(os.path.abspath(sys.argv[0]))
with open(os.path.join(here, "git.log"), "a") as log:
    log.write(" ".join(sys.argv[1:]) + " @ " + os.getcwd() + "\n")
mode = open(os.path.join(here, "git-mode")).read().strip() if os.path.exists(os.path.join(here, "git-mode")) else ""
if "ls-remote" in sys.argv:
    if mode == "unreachable":
        print("fatal: unable to access 'https://github.com/x/': Could not resolve host: github.com", file=sys.stderr)
        sys.exit(128)
    print("abc\tHEAD"); sys.exit(0)
if "clone" in sys.argv:
    if mode == "clone-fails":
        print("fatal: early EOF", file=sys.stderr); sys.exit(128)
    dest = sys.argv[-1]
    os.makedirs(os.path.join(dest, "hopper"))
    setup = "open(os.path.join(here, 'built-from'), 'w').write(os.getcwd())\n"
    open(os.path.join(dest, "hopper", "setup.py"), "w").write(setup)
    sys.exit(0)
"""


class Target:
    """A fake venv: `bin/python` (the fake pip) and `site/` (its only search-path entry)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "venv" / "bin"
        self.bin.mkdir(parents=True)
        self.site = root / "venv" / "site"
        self.site.mkdir()
        self.python = self.bin / "python"
        self.python.write_text(FAKE_PYTHON.format(python=sys.executable))
        self.python.chmod(0o755)
        self.behave()

    @property
    def sys_path(self) -> list[str]:
        return [str(self.site)]

    def behave(self, **modes: str) -> None:
        modes = {SITE_KEY: str(self.site), **modes}
        (self.bin / "behaviour").write_text("".join(f"{k.replace('_', '-')}={v}\n" for k, v in modes.items()))

    def calls(self) -> list[dict[str, object]]:
        log = self.bin / "calls.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def installs(self, dry: bool | None = None) -> list[list[str]]:
        out = []
        for call in self.calls():
            argv = [str(a) for a in call["argv"]]  # type: ignore[attr-defined]
            if argv[2:3] == ["install"] and (dry is None or ("--dry-run" in argv) is dry):
                out.append(argv)
        return out

    def dist(self, name: str, version: str, extra: dict[str, str] | None = None, record: bool = True) -> None:
        """An installed distribution, as pip leaves it (a RECORD with hashes)."""
        pkg = name.replace("-", "_")
        files = {f"{pkg}/__init__.py": f"VERSION = {version!r}\n", **(extra or {})}
        info = f"{pkg}-{version}.dist-info"
        files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        for rel, text in files.items():
            path = self.site / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if record:
            rows = [f"{r},sha256={_digest(t)},{len(t)}" for r, t in files.items()] + [f"{info}/RECORD,,"]
            (self.site / info / "RECORD").write_text("\n".join(rows) + "\n")

    def cuda_toolkit(self) -> dict[str, str]:
        """torch as a CUDA build and an nvcc of its own: what a source build needs (the variables to set)."""
        version = self.site / "torch" / "version.py"
        version.parent.mkdir(parents=True, exist_ok=True)
        version.write_text("__version__ = '2.11.0+cu130'\ncuda = '13.0'\nhip = None\n")
        nvcc = self.root / "cuda" / "bin" / "nvcc"
        nvcc.parent.mkdir(parents=True, exist_ok=True)
        nvcc.write_text("#!/bin/sh\nexit 0\n")
        nvcc.chmod(0o755)
        return {"CUDA_HOME": str(self.root / "cuda")}

    def snapshot(self) -> dict[str, str]:
        """Every file under site/ (relative path -> content), hidden undo folders left out."""
        out = {}
        for path in sorted(self.site.rglob("*")):
            rel = str(path.relative_to(self.site))
            if path.is_file() and not rel.startswith(".fa-doctor-undo-"):
                out[rel] = path.read_text()
        return out

    def leftovers(self) -> list[str]:
        return [p.name for p in self.site.iterdir() if p.name.startswith(".fa-doctor-undo-")]


def _digest(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


def fake_git(folder: Path, mode: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    git = folder / "git"
    git.write_text(FAKE_GIT.format(python=sys.executable))
    git.chmod(0o755)
    (folder / "git-mode").write_text(mode)
    return folder


def path_with(folder: Path) -> str:
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


def unchanged(result: ApplyResult) -> bool:
    """Nothing in the environment changed: no step remains in effect, and a failed one left nothing."""
    return not result.ran and (result.failed is None or result.failed.left_unchanged)


class SitePip:
    """The same fake pip, as a `pip` package in a real venv's site folder (tests/fakeenv.py makes venvs without
    pip), so `<venv>/bin/python -m pip` runs it: `behave`, `calls` and `installs` as for `Target`, the log and the
    behaviour file in `control` (outside the venv)."""

    def __init__(self, site: Path, control: Path) -> None:
        self.site, self.bin = site, control
        control.mkdir(parents=True, exist_ok=True)
        (control / "fakepip.py").write_text(FAKE_PYTHON.format(python=sys.executable).split("\n", 1)[1])
        pkg = site / "pip"
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "__main__.py").write_text(
            "import sys\n"
            f"sys.argv = [{str(control / 'python')!r}, '-m', 'pip', *sys.argv[1:]]\n"
            f"exec(compile(open({str(control / 'fakepip.py')!r}).read(), 'fakepip', 'exec'))\n"
        )
        self.behave()

    behave = Target.behave
    calls = Target.calls
    installs = Target.installs
