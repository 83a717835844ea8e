"""`fa-doctor fix --apply`: a transaction. Every step is proven before the first change (`Runner.prove`; what
cannot be proven is Refused), then run (`Runner.run`), each change journalled with its undo; a failure or an
interrupt puts back everything that can be put back. The proofs and stages: docs/fix.md ("Repairs")."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from fa_doctor.catalog import names
from fa_doctor.catalog.families import normalize
from fa_doctor.diagnose.plan import feasible
from fa_doctor.fix import journal as J
from fa_doctor.model.actions import Action, BuildFromClone, EditFile, MovePath, PipInstall, PipUninstall, runnable
from fa_doctor.model.install import Distribution
from fa_doctor.probes.environment import OVERRIDE
from fa_doctor.process import interrupt, proc
from fa_doctor.render.shell import describe

# pip's own words when the index (or a proxy) cannot be reached; any one of them settles it.
NETWORK = re.compile(
    r"Failed to establish a new connection|NewConnectionError|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|Connection refused|ConnectTimeoutError|ReadTimeoutError|"
    r"Max retries exceeded|Could not fetch URL|ProxyError|SSLError|Connection (?:aborted|reset)|"
    r"No route to host|Read timed out|Connection timed out|Could not resolve host|unable to access",
    re.IGNORECASE,
)


class Failed(Exception):
    """A step ran and failed (its exit code and output kept for the report)."""

    def __init__(self, message: str, returncode: int | None = None, output: str = "") -> None:
        super().__init__(message)
        self.returncode, self.output = returncode, output


class Refused(Exception):
    """The step cannot be proven safe; nothing was changed."""


@dataclass(frozen=True, slots=True)
class Step:
    """One action and what became of it. `output` is the tail of what the command printed."""

    action: Action
    description: str
    ok: bool
    message: str
    returncode: int | None = None
    output: str = ""
    seconds: float = 0.0
    left_unchanged: bool = False  # a failed step: nothing it changed remains (it changed nothing, or was undone)
    status: str = "done"  # done | failed | refused | skipped | undone | kept (an undo that failed) | proven
    undo: str = ""  # how to put it back by hand


@dataclass(frozen=True, slots=True)
class ApplyResult:
    ran: tuple[Step, ...]  # completed and still in effect, in order
    failed: Step | None  # the step that stopped the run (failed, or refused when nothing could run)
    not_run: tuple[Action, ...]  # never started
    manual: tuple[Action, ...]  # SetEnv / UnsetEnv / RunCommand: for the user (render them with actions.render)
    undone: tuple[Step, ...] = ()  # completed, then put back
    refused: tuple[Step, ...] = ()  # could not be proven: they (and the rest of their group) did not run
    skipped: tuple[Step, ...] = ()  # a build whose clone source does not answer
    interrupted: int | None = None  # the signal that stopped the run
    journal: str | None = None  # the journal file, kept when something went wrong
    state: str = ""  # one sentence: what the environment holds now
    proven: tuple[Step, ...] = ()  # dry run: the steps that would run
    dry_run: bool = False
    leftovers: tuple[J.Leftover, ...] = ()  # an earlier apply on this target that did not finish

    @property
    def ok(self) -> bool:
        return self.failed is None and self.interrupted is None and not self.refused and not self.blocked

    @property
    def blocked(self) -> bool:
        """Refused for an earlier apply's leftovers (or one still running): nothing was tried."""
        return bool(self.leftovers) and not self.dry_run


Progress = Callable[[str], None]


def apply(
    actions: Sequence[Action],
    *,
    python: str,
    timeout: float | None = None,
    progress: Progress | None = None,
    torch_moves: Collection[Action] = (),
    sys_path: Sequence[str] | None = None,
    groups: Sequence[Hashable] | None = None,
    dry_run: bool = False,
) -> ApplyResult:
    """Prove, then run `actions` in the target interpreter `python`, as one transaction; with `dry_run`, prove
    only. `groups[i]` names the repair `actions[i]` belongs to: a refused step holds back its own group only.
    Never raises for a failing step, nor for SIGINT/SIGTERM/SIGHUP: they come back in the result."""
    group_of = list(groups) if groups is not None else [0] * len(actions)  # zip(strict=True): one per action
    manual = tuple(a for a in actions if not runnable(a))
    pairs = [(a, g) for a, g in zip(actions, group_of, strict=True) if runnable(a)]
    if not pairs:
        return ApplyResult((), None, (), manual, state="nothing was changed", dry_run=dry_run)
    workdir = tempfile.mkdtemp(prefix=J.PREFIX)  # 0700, ours alone
    book = J.Journal(os.path.join(workdir, "journal.json"))
    runner = Runner(python, workdir, book, timeout, set(torch_moves))
    runner.actions, runner.manual = [a for a, _ in pairs], manual
    result: ApplyResult | None = None
    try:
        try:
            result = _transaction(runner, [g for _, g in pairs], sys_path, progress, dry_run)
        except interrupt.Interrupted as exc:  # during the proofs: nothing was changed yet
            result = ended(runner, [], -1, None, exc.signum)
        return result
    finally:
        # The journal (and any saved files an undo could not put back) stay when something remains to see.
        trouble = result is None or (not result.ok and result.journal is not None)
        if result is not None and not (result.ran and (result.failed or result.interrupted is not None)):
            for snap in runner.snapshots:  # the saved files go, unless an undo failed: the journal names them
                shutil.rmtree(snap.folder, ignore_errors=True)
        if trouble and book.entries:
            for entry in os.scandir(workdir):
                if entry.name != "journal.json" and entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                elif entry.name != "journal.json":
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        J.forget_listings()  # the re-check must read the folders again


def _transaction(
    runner: Runner, groups: list[Hashable], sys_path: Sequence[str] | None, progress: Progress | None, dry_run: bool
) -> ApplyResult:
    runnable, manual, total = runner.actions, runner.manual, len(runner.actions)
    say = progress or (lambda _line: None)
    say(f"Proving {total} step(s) before changing anything")
    try:
        runner.start(sys_path)
    except Refused as exc:
        step = Step(runnable[0], describe(runnable[0]), False, str(exc), left_unchanged=True, status="refused")
        return ApplyResult((), step, tuple(runnable[1:]), manual, refused=(step,), state="nothing was changed",
                           dry_run=dry_run)  # fmt: skip
    left = tuple(J.find(runner.python, runner.sys_path, exclude=runner.workdir))
    if left and not dry_run:
        busy = any(x.running is not None for x in left)
        why = "another fix --apply is changing" if busy else "an earlier fix --apply did not finish on"
        return ApplyResult((), None, tuple(runnable), manual, leftovers=left,
                           state=f"nothing was changed: {why} this environment; resolve it first")  # fmt: skip
    refused: dict[int, Step] = {}
    skipped: list[Step] = []
    for index, action in enumerate(runnable):
        label = f"[{index + 1}/{total}] {describe(action)}"
        try:
            runner.prove(index, action)
        except Refused as exc:
            say(f"{label}: refused: {exc}")
            refused[index] = Step(action, describe(action), False, str(exc), left_unchanged=True, status="refused")
        if index in runner.skips:
            say(f"{label}: skipped: {runner.skips[index]}")
            skipped.append(Step(action, describe(action), True, runner.skips[index], status="skipped"))
    held = {groups[i] for i in refused}
    blocked = [i for i in range(total) if groups[i] in held and i not in refused]
    steps_refused = tuple(refused[i] for i in sorted(refused))
    runs = [i for i in range(total) if i not in refused and i not in blocked and i not in runner.skips]
    if dry_run:
        proven = tuple(
            Step(runnable[i], describe(runnable[i]), True, "proven: it would run", status="proven") for i in runs
        )
        state = f"dry run: nothing was changed; {len(proven)} step(s) proven"
        if refused:
            more = f" ({len(blocked)} more of the same repairs would not run)" if blocked else ""
            state += f", {len(refused)} refused{more}"
        return ApplyResult((), None, tuple(runnable[i] for i in blocked), manual, refused=steps_refused,
                           skipped=tuple(skipped), proven=proven, dry_run=True, leftovers=left,
                           state=state + (f", {len(skipped)} skipped" if skipped else ""))  # fmt: skip
    if refused and not runs:
        first = steps_refused[0]
        rest = tuple(a for a in runnable if a is not first.action)
        return ApplyResult(
            (), first, rest, manual, refused=steps_refused, skipped=tuple(skipped),
            state="nothing was changed: the plan did not run, because a step could not be proven safe",
        )  # fmt: skip
    runner.skipped, runner.refused = skipped, steps_refused
    done: list[tuple[int, Step]] = []
    running: tuple[int, float] | None = None  # the step whose command is under way, and since when
    try:
        for index in runs:
            action = runnable[index]
            label = f"[{index + 1}/{total}] {describe(action)}"
            interrupt.checkpoint(f"apply-{index + 1}")  # a test hook: a signal between two steps
            say(label)
            running = (index, time.monotonic())
            runner.book.begin(index, describe(action))
            try:
                message, undo, returncode, output = runner.run(index, action)
            except Failed as exc:
                say(f"{label}: failed: {exc}")
                failed = Step(action, describe(action), False, str(exc), exc.returncode, exc.output,
                              time.monotonic() - running[1], status="failed")  # fmt: skip
                return ended(runner, done, index, failed, None)
            seconds = time.monotonic() - running[1]
            done.append((index, Step(action, describe(action), True, message, returncode, output, seconds, undo=undo)))
            running = None
            say(f"{label}: {message}")
    except interrupt.Interrupted as exc:
        if running is None:  # between two steps: the next one never started
            last = done[-1][0] if done else -1
            return ended(runner, done, last, None, exc.signum)
        index, since = running
        stopped = Step(runnable[index], describe(runnable[index]), False,
                       f"interrupted by {signal.Signals(exc.signum).name}", seconds=time.monotonic() - since,
                       status="failed")  # fmt: skip
        return ended(runner, done, index, stopped, exc.signum)
    runner.book.write("done")
    state = f"all {len(done)} step(s) completed" + (f"; {len(skipped)} skipped" if skipped else "")
    if refused:
        more = f" ({len(blocked)} step(s) of the same repairs not run)" if blocked else ""
        state += f"; {len(refused)} refused before anything changed{more}: the other repairs ran"
    return ApplyResult(tuple(s for _, s in done), None, tuple(runnable[i] for i in blocked), manual,
                       refused=steps_refused, skipped=tuple(skipped), state=state)  # fmt: skip


def ended(
    runner: Runner, done: list[tuple[int, Step]], index: int, failed: Step | None, signum: int | None
) -> ApplyResult:
    """A step failed or a signal came: undo the journal, newest first, and say what remains. The undo runs with
    SIGINT/SIGTERM/SIGHUP held: a Ctrl-C cannot stop it half-way; it is reported."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, interrupt.SIGNALS)
    try:
        results, _ = runner.book.rollback()
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a held signal's handler runs here
        except interrupt.Interrupted as exc:
            signum = exc.signum if signum is None else signum
    problems = {e.step: why for e, why in results if why is not None}
    undone_steps = {e.step for e, why in results if why is None}
    undone = [replace(s, status="undone") for i, s in done if i in undone_steps and i not in problems]
    kept = [
        replace(s, status="kept", message=f"{s.message}; its undo failed: {problems[i]}")
        for i, s in done
        if i in problems
    ]
    kept += [s for i, s in done if i not in undone_steps and i not in problems]  # changed nothing to undo
    if failed is not None:
        own_changes = [e for e in runner.book.entries if e.step == index]
        clean = all(e.step not in problems for e in own_changes)
        note = "" if not own_changes else "; its changes were undone" if clean else "; its changes could not be undone"
        failed = replace(failed, message=failed.message + note, left_unchanged=clean)
    not_yet = {id(s.action) for s in runner.refused}
    not_run = tuple(
        a for i, a in enumerate(runner.actions) if i > index and i not in runner.skips and id(a) not in not_yet
    )
    runner.book.write("rolled back" if not kept else "partly rolled back")
    if kept or (failed is not None and not failed.left_unchanged):
        remains = "; ".join(f"{k.description} remains ({k.undo or 'see the journal'})" for k in kept)
        state = f"the environment is partly changed: {remains}; journal: {runner.book.path}"
    elif undone:
        state = f"every completed step was undone ({len(undone)}); the environment is as it was before"
    else:
        state = "nothing was changed"
    return ApplyResult(
        tuple(kept), failed, not_run, runner.manual, undone=tuple(undone), skipped=tuple(runner.skipped),
        interrupted=signum, journal=runner.book.path if runner.book.entries else None, state=state,
        refused=runner.refused,
    )  # fmt: skip


# ---- the proofs ------------------------------------------------------------------------------------------------------


Item = tuple[str, str, bool]  # what pip's report says it would install: (name, version, requested)


@dataclass(frozen=True, slots=True)
class Inventory:
    """The target's distributions, read from its search path just before the proofs."""

    copies: Mapping[str, tuple[Distribution, ...]]  # normalised name -> copies, first on the path first
    protected: frozenset[str]  # torch and every exact pin of an installed server

    def first(self, name: str) -> Distribution | None:
        found = self.copies.get(normalize(name), ())
        return found[0] if found else None


def read_inventory(sys_path: Sequence[str]) -> Inventory:
    copies: dict[str, list[Distribution]] = {}
    for dist in J.scan(sys_path, lambda name: True):
        copies.setdefault(dist.normalized, []).append(dist)
    servers = [copies[normalize(s)][0] for s in names.SERVERS if copies.get(normalize(s))]
    return Inventory({k: tuple(v) for k, v in copies.items()}, feasible.protected_names(servers))


def ground(inventory: Inventory, sys_path: Sequence[str], env: Mapping[str, str]) -> feasible.Ground:
    """The ground the feasibility rule reads, from the target as it is now (the planner read it from the check)."""
    from fa_doctor.probes.environment import find_git, find_nvcc
    from fa_doctor.probes.torch_build import read_torch_build

    build = read_torch_build(sys_path) if inventory.first(names.TORCH) is not None else None
    dists = [d for copies in inventory.copies.values() for d in copies]
    cuda = build is not None and bool(build.cuda)
    return feasible.ground_from(dists, cuda_torch=cuda, nvcc=find_nvcc(env), git=find_git(env))


def check_feasible(action: Action, ground: feasible.Ground, torch_move: bool) -> None:
    """The planner's rule, asked again on the target as it is now: what it refuses is refused here."""
    why = feasible.refusal(action, ground, torch_move=torch_move, allow_torch_change=torch_move)
    if why is not None:
        raise Refused(f"{why}; not run")


def read_report(path: str) -> list[Item]:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        return [
            (normalize(str(i["metadata"]["name"])), str(i["metadata"]["version"]), bool(i.get("requested")))
            for i in doc.get("install", [])
        ]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Refused(f"pip's dry-run report cannot be read ({exc}); not run") from None


def check_report(items: list[Item], inventory: Inventory, may_move_torch: bool) -> list[Distribution]:
    """Refuse what pip would do that fa-doctor may not; return the installed copies it would replace."""
    replaces: list[Distribution] = []
    for name, version, requested in items:
        copies = inventory.copies.get(name, ())
        have = copies[0] if copies else None
        if name == names.TORCH and not may_move_torch and not (have is None and requested):
            # A torch the step names where none is installed changes nothing: that install is the repair.
            verb = f"replace torch {have.version} with {version}" if have else f"install torch {version}"
            raise Refused(f"pip would {verb}; fa-doctor never changes torch without --allow-torch-change")
        if name in inventory.protected and name != names.TORCH and have is not None:
            if have.version != version:
                raise Refused(f"pip would replace {name} {have.version}, which the server pins, with {version}")
            if not requested:
                raise Refused(f"pip would reinstall {name}, which the server pins, though the step does not name it")
        if len(copies) > 1:
            where = ", ".join(f"{c.version} in {c.location}" for c in copies)
            raise Refused(
                f"{name} has {len(copies)} copies on the path ({where}): pip would replace the first, the one the "
                "server imports; move the shadowed copy aside first"
            )
        if have is not None:
            if not os.access(have.location, os.W_OK):
                raise Refused(f"{have.location} is not writable: pip cannot replace {name} there")
            replaces.append(have)
    return replaces


def check_uninstall(action: PipUninstall, inventory: Inventory) -> list[Distribution]:
    """The copies it removes (torch, the server's pins and names with two copies were refused by `feasible`)."""
    out = []
    for raw in action.names:
        copies = inventory.copies.get(normalize(raw), ())
        if not copies:
            raise Refused(f"{raw} is not installed; nothing to uninstall")
        if not os.access(copies[0].location, os.W_OK):
            raise Refused(f"{copies[0].location} is not writable")
        out.append(copies[0])
    return out


def _real(path: str) -> str:
    """The folder resolved, the last name kept (a symlink is moved as a link)."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _inside(path: str, root: str) -> bool:
    return path != root and path.startswith(root.rstrip("/") + "/")


def check_move(action: MovePath, inventory: Inventory) -> tuple[str, str]:
    """(source, destination) resolved, once proven."""
    root = os.path.realpath(action.root)
    src, dst = _real(action.path), _real(action.backup)
    if not (_inside(src, root) and _inside(dst, root)):
        raise Refused(f"{action.path} or its backup resolves outside {action.root}; not moved")
    if not os.path.lexists(src):
        raise Refused(f"{action.path} is gone already; nothing to move")
    if os.path.lexists(dst):
        raise Refused(f"{action.backup} exists; not moved (nothing is overwritten)")
    try:
        same = os.stat(os.path.dirname(src)).st_dev == os.stat(os.path.dirname(dst)).st_dev
    except OSError as exc:
        raise Refused(f"cannot read {os.path.dirname(dst)}: {exc.strerror or exc}; not moved") from None
    if not same:
        raise Refused(f"{action.backup} is on another filesystem than {action.path}; not moved")
    for folder in {os.path.dirname(src), os.path.dirname(dst)}:
        if not os.access(folder, os.W_OK):
            raise Refused(f"{folder} is not writable; not moved")
    dists = [d for d in map(inventory.first, sorted(inventory.protected)) if d is not None]
    for path, label in (owned for d in dists for owned in feasible.owned_paths(d)):
        path = _real(path)
        if src == path or _inside(path, src) or _inside(src, path):
            raise Refused(f"{action.path} holds the {label} the server imports; not moved")
    return src, dst


# ---- the steps: proven, then run ------------------------------------------------------------------------------------

_QUIET = {"PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "GIT_TERMINAL_PROMPT": "0"}


@dataclass(slots=True)
class Proof:
    items: list[Item] | None = None  # what pip would install
    saves: list[Distribution] = field(default_factory=list)  # the installed copies it takes out: saved first
    move: tuple[str, str] | None = None
    folder: str | None = None  # a build's own folder (the clone is in it)


def _tail(done: proc.Completed) -> str:
    return (done.out() + done.err())[-4000:]


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
        self.actions: list[Action] = []  # the runnable steps, in order (apply() sets them, and the next line)
        self.manual: tuple[Action, ...] = ()  # SetEnv / UnsetEnv / RunCommand: for the user
        self.skipped: list[Step] = []  # what the proofs found, once they are done: for ended()
        self.refused: tuple[Step, ...] = ()

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
            return proc.run_supervised(argv, timeout, env={**os.environ, **_QUIET, **dict(env)}, cwd=cwd)
        except (OSError, ValueError) as e:
            raise error(f"cannot start {argv[0]}: {e}") from None

    def start(self, sys_path: Sequence[str] | None) -> None:
        if not (os.path.isfile(self.python) and os.access(self.python, os.X_OK)):
            raise Refused(f"{self.python} is not an executable file")
        if sys_path is None:
            from fa_doctor.probes.target import TargetError, TargetProbe

            try:
                sys_path = TargetProbe(self.python, 30.0).result().sys_path
            except TargetError as exc:
                raise Refused(f"the target's search path cannot be read: {exc}") from None
        self.sys_path = tuple(sys_path)
        self.inventory = read_inventory(self.sys_path)
        self.ground = ground(self.inventory, self.sys_path, os.environ)
        self.book.python, self.book.sys_path = os.path.abspath(self.python), self.sys_path

    def pip_version(self) -> None:
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

    # ---- proofs ---------------------------------------------------------------------------------------------

    def prove(self, index: int, action: Action) -> None:
        proof = self.proofs.setdefault(index, Proof())
        try:
            check_feasible(action, self.ground, action in self.torch_moves)  # the planner's rule, first
            if isinstance(action, BuildFromClone):
                proof.folder = tempfile.mkdtemp(prefix=f"build-{index}-", dir=self.workdir)
                if self.reachable(index, action, proof.folder):
                    self.clone(action, proof.folder)
                    proof.items, proof.saves = self.dry_run(action.install, action, proof.folder)
            elif isinstance(action, PipInstall):
                proof.items, proof.saves = self.dry_run(action, action, self.workdir)
            elif isinstance(action, PipUninstall):
                proof.saves = check_uninstall(action, self.inventory)
            elif isinstance(action, MovePath):
                proof.move = check_move(action, self.inventory)
            elif isinstance(action, EditFile):
                self.edit(index, action, dry_run=True)
            else:
                raise Refused(f"not an action fa-doctor can run: {type(action).__name__}")
            for dist in proof.saves:
                J.record_files(dist.location, dist.metadata_dir)  # refused if its files are unknown: no undo
        except J.SnapshotError as exc:
            raise Refused(str(exc)) from None

    def reachable(self, index: int, action: BuildFromClone, folder: str) -> bool:
        argv = ["git", "ls-remote", "--exit-code", "--", action.repo, "HEAD"]
        done = self.command(argv, min(self.limit(action), 60.0), folder, error=Refused)
        if done.returncode == 0:
            return True
        why = "no answer in time" if done.timed_out else (_tail(done).strip().splitlines() or ["no answer"])[-1][:200]
        self.skips[index] = (
            f"{action.repo} cannot be reached ({why}): the build is skipped, nothing was cloned or installed; run "
            "the printed command where it can be reached"
        )
        return False

    def clone(self, action: BuildFromClone, folder: str) -> None:
        argv = ["git", "-c", "protocol.file.allow=never", "-c", "protocol.ext.allow=never", *action.clone_argv]
        done = self.command(argv, min(self.limit(action), 900.0), folder)
        if done.timed_out or done.returncode != 0:
            raise Refused(f"git clone of {action.repo} failed ({_last_words(done)})")
        if not os.path.isdir(os.path.join(folder, action.requirement)):
            raise Refused(f"the clone of {action.repo} has no {action.subdir}/ folder")

    def dry_run(self, pip: PipInstall, action: Action, cwd: str) -> tuple[list[Item], list[Distribution]]:
        self.pip_version()
        report = tempfile.mktemp(prefix="report-", suffix=".json", dir=self.workdir)
        limit = min(self.limit(action), 300.0)
        argv = self.argv(pip)  # `install` is argv[3]: the dry run and its report right after it, short network timeouts
        argv[4:4] = ["--dry-run", "--report", report, "--timeout", "15", "--retries", "1"]
        done = self.command(argv, limit, cwd, pip.env, error=Refused)
        if done.timed_out:
            raise Refused(f"pip's dry run did not finish in {limit:.0f} s (is the package index reachable?)")
        if done.returncode != 0:
            text = _tail(done)
            why = "the package index cannot be reached" if NETWORK.search(text) else "pip cannot resolve this install"
            raise Refused(f"{why} (dry run): {text.strip().splitlines()[-1][:300] if text.strip() else 'no output'}")
        items = read_report(report)
        return items, check_report(items, self.inventory, action in self.torch_moves)

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
        if isinstance(action, (PipInstall, BuildFromClone)) and proof.items is not None:
            pip = action.install if isinstance(action, BuildFromClone) else action
            snaps = self.save(index, proof.saves, [n for n, _, _ in proof.items])
            done = self.command(self.argv(pip), self.limit(action), proof.folder or self.workdir, pip.env)
            verb, failed = "pip", f"failed (exit {done.returncode})"
        elif isinstance(action, PipUninstall):
            snaps = self.save(index, proof.saves, [])
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
        if proof.items is None or verb != "pip":
            message = "uninstalled " + ", ".join(f"{s.name} {s.version}" for s in snaps)
        else:
            was = {s.name: s.version for s in snaps}
            parts = [f"{n} {v}" + (f" (was {was[n]})" if n in was else " (new)") for n, v, _ in proof.items]
            message = "installed " + (", ".join(parts) or "nothing new")
        return message, self.book.entries[-1].undo, done.returncode, text

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
                shutil.rmtree(snap.folder, ignore_errors=True)
            raise Failed(f"{exc}; not run") from None
        self.snapshots += snaps
        text = ", ".join(f"{s.name} {s.version}" for s in snaps) or "nothing installed before"
        by_hand = "; ".join(f"pip install --no-deps --force-reinstall {s.name}=={s.version}" for s in snaps)
        data = {"kind": "install", "snapshots": [asdict(s) for s in snaps], **about}
        saved = f"saved {text} in {', '.join(s.folder for s in snaps) or '-'}"
        self.book.add(index, saved, by_hand or "pip uninstall " + " ".join(wrote), data)
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
        value = None if action.value is None else int(action.value)
        result = envfile.edit(action.path, set_value=value, dry_run=dry_run)
        if result.error:
            raise error(result.error)
        if dry_run or not (result.changed and result.backup):
            return f"{action.path}: nothing to change", ""
        real, backup = os.path.realpath(result.path), result.backup
        by_hand = f"mv -- {backup} {real}"
        self.book.add(index, f"edited {result.path} (backup {backup})", by_hand,
                      {"kind": "edit", "path": real, "backup": backup})  # fmt: skip
        return f"edited {action.path} (backup {backup})", by_hand
