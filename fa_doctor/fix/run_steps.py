"""The steps of `fix --apply`, proven (`Runner.prove`) and then run (`Runner.run`), each change journalled with
its undo. `fa_doctor.fix.apply` drives them as one transaction."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from fa_doctor.diagnose.plan import feasible
from fa_doctor.fix import journal as J
from fa_doctor.fix import proofs
from fa_doctor.fix.proofs import NETWORK, Failed, Inventory, Refused
from fa_doctor.model.actions import Action, BuildFromClone, EditFile, MovePath, PipInstall, PipUninstall
from fa_doctor.model.install import Distribution
from fa_doctor.probes.environment import OVERRIDE
from fa_doctor.process import children, proc

_TAIL = 4000
_DRY_LIMIT = 300.0
_CLONE_LIMIT = 900.0
_PROBE_LIMIT = 30.0
_QUIET = {"PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "GIT_TERMINAL_PROMPT": "0"}


@dataclass(slots=True)
class Proof:
    install: proofs.InstallProof | None = None
    uninstall: list[Distribution] = field(default_factory=list)
    move: tuple[str, str] | None = None
    folder: str | None = None  # a build's own folder (the clone is in it)


def _tail(done: proc.Completed) -> str:
    return (done.out() + done.err())[-_TAIL:]


def _last_words(done: proc.Completed) -> str:
    return _tail(done).strip()[-300:] or "no output"


class Runner:
    def __init__(
        self, python: str, workdir: str, book: J.Journal, timeout: float | None, torch_moves: set[Action]
    ) -> None:
        self.python, self.workdir, self.book = python, workdir, book
        self.timeout, self.torch_moves = timeout, torch_moves
        self.proofs: dict[int, Proof] = {}
        self.skips: dict[int, str] = {}
        self.sys_path: tuple[str, ...] = ()
        self.inventory = Inventory({}, frozenset())
        self.ground = feasible.Ground()
        self.pip: tuple[int, int] | None = None
        self.snapshots: list[J.Snapshot] = []

    def limit(self, action: Action) -> float:
        """--timeout, else 4 h a build (FA3's hopper: "well over an hour" with MAX_JOBS=4), 30 min an install."""
        if self.timeout is not None:
            return self.timeout
        return 4 * 3600.0 if isinstance(action, BuildFromClone) else 1800.0 if isinstance(action, PipInstall) else 600.0

    def command(
        self,
        argv: Sequence[str],
        timeout: float,
        cwd: str,
        env: Sequence[tuple[str, str]] = (),
        error: type[Exception] = Failed,
    ) -> proc.Completed:
        try:
            return children.run(argv, timeout, env={**os.environ, **_QUIET, **dict(env)}, cwd=cwd)
        except (OSError, ValueError) as e:
            raise error(f"cannot start {argv[0]}: {e}") from None

    def start(self, sys_path: Sequence[str] | None) -> None:
        if not (os.path.isfile(self.python) and os.access(self.python, os.X_OK)):
            raise Refused(f"{self.python} is not an executable file")
        if sys_path is None:
            from fa_doctor.probes.target import TargetError, probe_target

            try:
                sys_path = probe_target(self.python, _PROBE_LIMIT).sys_path
            except TargetError as exc:
                raise Refused(f"the target's search path cannot be read: {exc}") from None
        self.sys_path = tuple(sys_path)
        self.inventory = proofs.read_inventory(self.sys_path)
        self.ground = proofs.ground(self.inventory, self.sys_path, os.environ)
        self.book.python, self.book.sys_path = os.path.abspath(self.python), self.sys_path

    def pip_version(self) -> tuple[int, int]:
        if self.pip is None:
            done = self.command([self.python, "-m", "pip", "--version"], 60.0, self.workdir, error=Refused)
            m = re.match(r"pip (\d+)\.(\d+)", done.out())
            if done.returncode != 0 or m is None:
                raise Refused(f"pip does not run in {self.python} ({_last_words(done)})")
            self.pip = (int(m.group(1)), int(m.group(2)))
        if self.pip < (22, 2):
            raise Refused(
                f"pip {self.pip[0]}.{self.pip[1]} in {self.python} cannot prove an install (--dry-run --report needs "
                "pip 22.2 or later); upgrade pip there, or run the printed commands yourself"
            )
        return self.pip

    # ---- proofs ---------------------------------------------------------------------------------------------

    def prove(self, index: int, action: Action) -> None:
        proof = self.proofs.setdefault(index, Proof())
        try:
            proofs.check_feasible(action, self.ground, action in self.torch_moves)  # the planner's rule, first
            if isinstance(action, BuildFromClone):
                proof.folder = tempfile.mkdtemp(prefix=f"build-{index}-", dir=self.workdir)
                if self.reachable(index, action, proof.folder):
                    self.clone(action, proof.folder)
                    proof.install = self.dry_run(action.install, action, proof.folder)
            elif isinstance(action, PipInstall):
                proof.install = self.dry_run(action, action, self.workdir)
            elif isinstance(action, PipUninstall):
                proof.uninstall = proofs.check_uninstall(action, self.inventory)
                for dist in proof.uninstall:
                    J.record_files(dist.location, dist.metadata_dir)  # refused if its files are unknown
            elif isinstance(action, MovePath):
                proof.move = proofs.check_move(action, self.inventory)
            elif isinstance(action, EditFile):
                self.edit(index, action, dry_run=True)
            else:
                raise Refused(f"not an action fa-doctor can run: {type(action).__name__}")
        except J.SnapshotError as exc:
            raise Refused(str(exc)) from None

    def reachable(self, index: int, action: BuildFromClone, folder: str) -> bool:
        argv = ["git", "ls-remote", "--exit-code", "--", action.repo, "HEAD"]
        done = self.command(argv, min(self.limit(action), 60.0), folder, error=Refused)
        if done.returncode == 0:
            return True
        last = (_tail(done).strip().splitlines() or ["no answer"])[-1][:200]
        why = "no answer in time" if done.timed_out else last
        self.skips[index] = (
            f"{action.repo} cannot be reached ({why}): the build is skipped, nothing was cloned or installed; run "
            "the printed command where it can be reached"
        )
        return False

    def clone(self, action: BuildFromClone, folder: str) -> None:
        argv = ["git", "-c", "protocol.file.allow=never", "-c", "protocol.ext.allow=never", *action.clone_argv]
        done = self.command(argv, min(self.limit(action), _CLONE_LIMIT), folder)
        if done.timed_out or done.returncode != 0:
            raise Refused(f"git clone of {action.repo} failed ({_last_words(done)})")
        if not os.path.isdir(os.path.join(folder, action.requirement)):
            raise Refused(f"the clone of {action.repo} has no {action.subdir}/ folder")

    def dry_run(self, pip: PipInstall, action: Action, cwd: str) -> proofs.InstallProof:
        self.pip_version()
        report = tempfile.mktemp(prefix="report-", suffix=".json", dir=self.workdir)
        limit = min(self.limit(action), _DRY_LIMIT)
        argv = self.argv(pip)  # `install` is argv[3]: the dry run and its report right after it, short network timeouts
        argv[4:4] = ["--dry-run", "--report", report, "--timeout", "15", "--retries", "1"]
        done = self.command(argv, limit, cwd, pip.env, error=Refused)
        if done.timed_out:
            raise Refused(f"pip's dry run did not finish in {limit:.0f} s (is the package index reachable?)")
        if done.returncode != 0:
            text = _tail(done)
            why = "the package index cannot be reached" if NETWORK.search(text) else "pip cannot resolve this install"
            raise Refused(f"{why} (dry run): {text.strip().splitlines()[-1][:300] if text.strip() else 'no output'}")
        items = proofs.read_report(report)
        replaces = proofs.check_report(items, self.inventory, action in self.torch_moves)
        for dist in replaces:
            J.record_files(dist.location, dist.metadata_dir)  # refused (SnapshotError) if it could not be put back
        return proofs.InstallProof(items, replaces)

    def argv(self, pip: PipInstall) -> list[str]:
        """The action's argv for the target interpreter (whatever the plan recorded), its constraints in a file."""
        out = [self.python, *pip.argv[1:]]
        if pip.constraints:
            i = len(out) - out[::-1].index("-c")  # the slot after the last `-c`, where PipInstall.argv puts it
            fd, out[i] = tempfile.mkstemp(prefix="constraints-", suffix=".txt", dir=self.workdir)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write("".join(c + "\n" for c in pip.constraints))
        return out

    # ---- running ----------------------------------------------------------------------------------------------

    def run(self, index: int, action: Action) -> tuple[str, str, int | None, str]:
        """(message, how to undo by hand, returncode, output tail); Failed when it failed."""
        proof = self.proofs[index]
        if isinstance(action, MovePath) and proof.move is not None:
            return (*self.move(index, action, *proof.move), None, "")
        if isinstance(action, EditFile):
            return (*self.edit(index, action, dry_run=False), None, "")
        if isinstance(action, (PipInstall, BuildFromClone)) and proof.install is not None:
            pip = action.install if isinstance(action, BuildFromClone) else action
            snaps = self.save(index, proof.install.replaces, proof.install.names)
            done = self.command(self.argv(pip), self.limit(action), proof.folder or self.workdir, pip.env)
            verb, failed = "pip", f"failed (exit {done.returncode})"
        elif isinstance(action, PipUninstall):
            snaps = self.save(index, proof.uninstall, [])
            done = self.command([self.python, *action.argv[1:]], self.limit(action), self.workdir)
            verb, failed = "pip uninstall", f"exited {done.returncode}"
        else:
            raise Failed(f"not an action fa-doctor can run: {type(action).__name__}")
        text = _tail(done)
        if done.timed_out or done.returncode != 0:
            what = f"timed out after {self.limit(action):.0f} s" if done.timed_out else failed
            if verb == "pip" and NETWORK.search(text):
                what += ": the package index cannot be reached"
            raise Failed(f"{verb} {what}", done.returncode, text)
        if proof.install is None or verb != "pip":
            message = "uninstalled " + ", ".join(f"{s.name} {s.version}" for s in snaps)
        else:
            was = {s.name: s.version for s in snaps}
            parts = [f"{n} {v}" + (f" (was {was[n]})" if n in was else " (new)") for n, v, _ in proof.install.items]
            message = "installed " + (", ".join(parts) or "nothing new")
        return message, self.book.entries[-1].undo_text, done.returncode, text

    def save(self, index: int, dists: list[Distribution], wrote: list[str]) -> list[J.Snapshot]:
        """Snapshot `dists`, and journal the undo of a step that replaces them and writes `wrote`."""
        before = sorted({d.metadata_dir for n in wrote for d in self.inventory.copies.get(n, ())})
        about = {"wrote": wrote, "before": before, "sys_path": list(self.sys_path)}
        snaps: list[J.Snapshot] = []
        try:
            for dist in dists:
                snaps.append(J.take(dist.normalized, dist.version, dist.location, dist.metadata_dir, about))
        except J.SnapshotError as exc:
            for snap in snaps:
                J.discard(snap)
            raise Failed(f"{exc}; not run") from None
        self.snapshots += snaps
        text = ", ".join(f"{s.name} {s.version}" for s in snaps) or "nothing installed before"
        by_hand = "; ".join(f"pip install --no-deps --force-reinstall {s.name}=={s.version}" for s in snaps)
        self.book.add(
            index,
            f"saved {text} in {', '.join(s.folder for s in snaps) or '-'}",
            by_hand or "pip uninstall " + " ".join(wrote),
            {"kind": "install", "snapshots": [asdict(s) for s in snaps], **about},
        )
        return snaps

    def move(self, index: int, action: MovePath, src: str, dst: str) -> tuple[str, str]:
        if os.path.lexists(dst):
            raise Failed(f"{action.backup} appeared since the proof; not moved")
        try:
            os.rename(src, dst)
        except OSError as e:
            raise Failed(f"cannot move {action.path}: {e.strerror or e}; not moved") from None
        by_hand = f"mv -n -- {dst} {src}"
        self.book.add(index, f"moved {src} to {dst}", by_hand, {"kind": "move", "src": src, "dst": dst})
        return f"moved {action.path} to {action.backup}", by_hand

    def edit(self, index: int, action: EditFile, dry_run: bool) -> tuple[str, str]:
        """An env-file edit, proven by the editor's own dry run, undone from its backup: (message, how to undo
        by hand). Refused (proof) or Failed (run) when the editor refuses."""
        from fa_doctor.fix import envfile

        error = Refused if dry_run else Failed
        if action.variable != OVERRIDE:
            raise error(f"fa-doctor edits only {OVERRIDE} in files, not {action.variable}")
        if action.value not in (None, "2", "3", "4"):
            raise error(f"{OVERRIDE} can be set to 2, 3 or 4 only, not {action.value!r}")
        result = envfile.edit(
            action.path, set_value=None if action.value is None else int(action.value), dry_run=dry_run
        )
        if result.error:
            raise error(result.error)
        if dry_run or not (result.changed and result.backup):
            return f"{action.path}: nothing to change", ""
        real, backup = os.path.realpath(result.path), result.backup
        by_hand = f"mv -- {backup} {real}"
        self.book.add(index, f"edited {result.path} (backup {backup})", by_hand,
                      {"kind": "edit", "path": real, "backup": backup})  # fmt: skip
        return f"edited {action.path} (backup {backup})", by_hand

    def close(self, keep: bool) -> None:
        """Drop the saved files, unless an undo failed (`keep`): then the journal names them for a person."""
        if not keep:
            for snap in self.snapshots:
                J.discard(snap)
