"""The one way fa-doctor runs a subprocess: its own session, read with a deadline, nothing left behind (group,
descendants, ``FA_DOCTOR_RUN`` token); ``terminate_all`` is signal-safe (docs/internals.md, "Subprocesses").
``run_supervised`` starts `fix --apply`'s commands under `supervise.py` (internals.md, "fix --apply's commands").
``bounded`` runs a call that could hang on a hostile file system (a FIFO, a dead NFS mount) in a daemon thread."""

from __future__ import annotations

import atexit
import contextlib
import glob
import itertools
import os
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import TypeVar

TOKEN_VAR = "FA_DOCTOR_RUN"
_PROC = "/proc"
_CHUNK = 65536
_counter = itertools.count(1)
_LIVE: dict[int, Child] = {}  # pid -> child; plain dict operations are atomic, so no lock (see terminate_all)
_STARTING: dict[str, None] = {}  # tokens of children being started
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Completed:
    """What a bounded run produced. ``returncode``: None when the child could not be reaped, negative for a signal."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    truncated: bool  # some output beyond max_output was dropped (the tail is kept)
    seconds: float

    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


class Child:
    """A started child; OSError or ValueError when it cannot start, as ``subprocess.Popen``."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        pass_fds: Sequence[int] = (),
        preexec: Callable[[], None] | None = None,
    ) -> None:
        self.token = f"{os.getpid()}-{next(_counter)}-{time.monotonic_ns()}"
        child_env = {**(os.environ if env is None else env), TOKEN_VAR: self.token}
        # A signal here, before the child is registered: terminate_all finds it as our child, or by this token.
        _STARTING[self.token] = None
        try:
            self.proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_env,
                cwd=cwd,
                pass_fds=tuple(pass_fds),
                start_new_session=True,
                preexec_fn=preexec,  # runs in the child after setsid (fix --apply: a parent-death signal)
            )
            self.pid = self.proc.pid
            _LIVE[self.pid] = self
        finally:
            _STARTING.pop(self.token, None)

    def collect(
        self,
        timeout: float,
        *,
        max_output: int = 1 << 20,
        extra: Mapping[int, Callable[[bytes], None]] | None = None,
        grace: float = 0.5,
        reap: float = 2.0,
    ) -> Completed:
        """Read until every pipe is closed or the child has exited (plus ``grace``), at most ``timeout`` seconds;
        then kill what is left (on any exception too). ``extra`` maps more read fds (closed here) to a callback."""
        start = time.monotonic()
        deadline = start + max(0.0, timeout)
        out, err = bytearray(), bytearray()
        truncated = timed_out = False
        sel = selectors.DefaultSelector()
        try:
            pidfd: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # not Linux, kernel < 5.3, or already reaped
            pidfd = None
        try:
            for name, buf in (("stdout", out), ("stderr", err)):
                sel.register(getattr(self.proc, name).fileno(), selectors.EVENT_READ, buf)
            for fd, callback in (extra or {}).items():
                sel.register(fd, selectors.EVENT_READ, callback)
            if pidfd is not None:
                sel.register(pidfd, selectors.EVENT_READ, None)
            exited_at: float | None = None
            pipes = len(sel.get_map()) - (pidfd is not None)
            while pipes:
                now = time.monotonic()
                limit = deadline if exited_at is None else min(deadline, exited_at + grace)
                if now >= limit:
                    timed_out = exited_at is None
                    break
                # Without a pidfd, poll for the child's exit: a grandchild may hold the pipes open forever.
                wait = limit - now if pidfd is not None or exited_at is not None else min(limit - now, 0.05)
                for key, _ in sel.select(max(0.0, wait)):
                    if key.fd == pidfd:
                        sel.unregister(pidfd)
                        continue
                    try:
                        chunk = os.read(key.fd, _CHUNK)
                    except BlockingIOError:
                        continue
                    except OSError:
                        chunk = b""
                    if not chunk:
                        sel.unregister(key.fd)
                        pipes -= 1
                    elif isinstance(key.data, bytearray):
                        key.data.extend(chunk)
                        if len(key.data) > max_output:
                            truncated = True
                            del key.data[:-max_output]
                    else:
                        key.data(chunk)
                if exited_at is None and _exited(self.proc):
                    exited_at = time.monotonic()
                    # Leftovers die now, so the pipes they hold close and the read above ends.
                    self._sweep(signal.SIGKILL)
            # Every pipe closed, the child not yet gone (it is exiting, or closed its stdout and lives on):
            # wait for it until the deadline, without reaping it yet (see _exited).
            pause = 0.001
            while not timed_out and not _exited(self.proc):
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                elif pidfd is not None:
                    select.select([pidfd], [], [], left)
                else:
                    time.sleep(min(left, pause))
                    pause = min(pause * 2, 0.05)
        except BaseException:
            self.kill()
            raise
        finally:
            sel.close()
            if pidfd is not None:
                os.close(pidfd)
            for fd in extra or {}:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.kill(reap=reap)
        return Completed(self.proc.returncode, bytes(out), bytes(err), timed_out, truncated, time.monotonic() - start)

    def _sweep(self, sig: int) -> bool:
        """Signal the group, the live descendants and every process carrying our token (see module doc); whether
        any such process was found (none: nothing is left that could fork another)."""
        reaped = self.proc.returncode is not None  # then its pid, and so the group id, may be another's now
        pids = (set() if reaped else set(_descendants(self.pid))) | set(_tagged(self.token))
        if not reaped:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, sig)
        for pid in pids - {os.getpid()}:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        return bool(pids)

    def kill(self, reap: float = 2.0) -> None:
        """SIGKILL the child and its leftovers, reap it (waiting at most ``reap`` s), close the pipes, forget it."""
        for _ in range(3):  # a leftover that forks while we sweep gets another round
            if not self._sweep(signal.SIGKILL) or not _tagged(self.token):
                break
        # Forgotten before it is reaped: once reaped, its pid (the group id we signal) may belong to another.
        _LIVE.pop(self.pid, None)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=reap)
        for stream in filter(None, (self.proc.stdout, self.proc.stderr)):
            with contextlib.suppress(OSError):
                stream.close()


def run(
    argv: Sequence[str],
    timeout: float,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    max_output: int = 1 << 20,
    grace: float = 0.5,
) -> Completed:
    """Start and collect in one call; start failures raise OSError or ValueError as ``Child`` does."""
    return Child(argv, env=env, cwd=cwd).collect(timeout, max_output=max_output, grace=grace)


@lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # only fix --apply's commands need it

    try:
        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return fn


def _parent_death(prctl: Callable[..., int], sig: int, parent: int) -> None:
    prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG: `sig` when fa-doctor ends
    if os.getppid() != parent:  # fa-doctor ended between the fork and the prctl: the signal never comes
        os._exit(137)


@lru_cache(maxsize=1)
def _supervisor() -> str | None:
    if _prctl() is None or not sys.executable or not os.path.isdir("/proc/self/task"):
        return None
    try:
        with open(os.path.join(os.path.dirname(__file__), "supervise.py"), encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return None


def run_supervised(argv: Sequence[str], timeout: float, *, env: Mapping[str, str], cwd: str) -> Completed:
    """`run` in `cwd` (a folder fa-doctor made), on Linux under `supervise.py`, so that it ends with fa-doctor."""
    source, prctl = _supervisor(), _prctl()
    full = list(argv) if source is None else [sys.executable, "-I", "-c", source, *argv]
    sig = signal.SIGKILL if source is None else signal.SIGTERM
    preexec = None if prctl is None else partial(_parent_death, prctl, sig, os.getpid())
    return Child(full, env=env, cwd=cwd, preexec=preexec).collect(timeout, max_output=1 << 16)


def terminate_all(sig: int = signal.SIGTERM, grace: float = 1.0) -> int:
    """End every live child, any other child of ours (caught half-way through its start) and their leftovers:
    ``sig`` first, SIGKILL after ``grace`` s. Returns how many children there were. Safe in a signal handler."""
    children = list(_LIVE.values())
    strays = [pid for pid in _children(os.getpid()) if pid not in _LIVE]
    tokens = list(_STARTING)

    def sweep(signum: int) -> None:
        for child in children:
            child._sweep(signum)
        pids = [p for stray in strays for p in (*_descendants(stray), stray)]
        for pid in pids + [p for token in tokens for p in _tagged(token)]:
            with contextlib.suppress(OSError):
                os.kill(pid, signum)
        for pid in strays:
            with contextlib.suppress(OSError):
                os.killpg(pid, signum)  # a child started in its own session leads a group of that id

    sweep(sig)
    end = time.monotonic() + grace
    while sig != signal.SIGKILL and time.monotonic() < end:
        if all(_exited(c.proc) and not _tagged(c.token) for c in children) and not _running(strays):
            break
        time.sleep(0.02)
    sweep(signal.SIGKILL)
    return len(children) + len(strays)


atexit.register(terminate_all, signal.SIGKILL, 0.0)


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child has exited, without reaping it: its pid (its group id) stays ours till leftovers die."""
    if proc.returncode is not None:
        return True
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except (AttributeError, OSError):  # ChildProcessError included
        return proc.poll() is not None
    return info is not None


def _running(pids: Sequence[int]) -> bool:
    """Whether any of these (our children, so their state is ours to read) is still running, not a zombie."""
    for pid in pids:
        try:
            with open(f"{_PROC}/{pid}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[:1] != [b"Z"]:
                    return True
        except (OSError, IndexError):
            continue
    return False


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for path in glob.glob(f"{_PROC}/{pid}/task/*/children"):
        try:
            with open(path, "rb") as fh:
                out += [int(p) for p in fh.read(1 << 20).split()]
        except (OSError, ValueError):
            continue
    return out


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo and len(found) < 10000:
        for child in _children(todo.pop()):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def _tagged(token: str) -> list[int]:
    """Our processes whose environment holds this token (a few ms for a few hundred processes)."""
    needle = f"\0{TOKEN_VAR}={token}\0".encode()
    uid, me = os.getuid(), os.getpid()
    try:
        names = os.listdir(_PROC)
    except OSError:
        return []
    out: list[int] = []
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.stat(f"{_PROC}/{name}").st_uid != uid:
                continue
            with open(f"{_PROC}/{name}/environ", "rb") as fh:
                data = fh.read(1 << 20)
        except OSError:
            continue
        if needle in b"\0" + data + b"\0":
            out.append(int(name))
    return out


class Deadline(Exception):
    """A bounded call did not finish in time."""


def bounded(call: Callable[[], T], seconds: float, what: str) -> T:
    """Run `call` in a daemon thread; give up after `seconds` (the thread is abandoned, not killed)."""
    box: dict[str, object] = {}

    def runner() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=runner, name=f"fa-doctor {what}", daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise Deadline(f"{what} did not finish within {seconds:.0f} s (after {time.monotonic() - start:.1f} s)")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
