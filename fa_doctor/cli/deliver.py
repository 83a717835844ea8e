"""Delivery: run a command under the signal path, render its result in the chosen format to the right stream,
write the CI files beside it, and turn anything that goes wrong on the way into an exit code, never a traceback.
stdout carries only the product; progress and errors go to stderr, and so does `exec`'s report."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import signal
import stat
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

from fa_doctor.commands.failed import error_result, interrupted_result
from fa_doctor.model.result import EXIT_ERROR, CannotRun, Result
from fa_doctor.process import interrupt

Run = Callable[[Callable[[str], None], Any], Result]


@dataclasses.dataclass(frozen=True)
class Outputs:
    format: str = "human"
    verbose: bool = False
    no_color: bool = False
    junit: str | None = None
    markdown: str | None = None
    step_summary: bool = False
    quiet: bool = False  # the verdict line and what fails; no progress
    output: str | None = None  # -o/--output: the report goes to this file, not to the stream

    def color(self, stream: IO[str]) -> bool:
        from fa_doctor.render.progress import wants_color

        return wants_color(stream, self.no_color)


def _isatty(stream: IO[str] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):
        return False


def _width(stream: IO[str]) -> int:
    if _isatty(stream):
        with contextlib.suppress(OSError, ValueError):
            return max(80, os.get_terminal_size(stream.fileno()).columns)
    return 120


def render(result: Result, fmt: str, *, verbose: bool = False, quiet: bool = False, **style: Any) -> str:
    """`style`: color, width, wrap (prose wrapped at `width`: a terminal); `quiet`: the human report cut to the
    verdict and what fails."""
    from fa_doctor.render.base import renderer_for

    if fmt == "human" and quiet:
        from fa_doctor.render.human import QuietRenderer

        return QuietRenderer(**style).render(result)
    return renderer_for(fmt, verbose=verbose, **style).render(result)


def write(stream: IO[str], text: str) -> None:
    """Text the stream's encoding cannot hold (✓ on an ASCII terminal, lone surrogates) is escaped, not fatal.
    Bytes are written until all are out: under PYTHONUNBUFFERED=1 a raw file may take only part (a reader that
    leaves mid-report), and TextIOWrapper would not retry: the report would be cut without a BrokenPipeError."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    data = text.encode(encoding, "backslashreplace")
    binary = getattr(stream, "buffer", None)
    if binary is None:  # a text-only stream (StringIO)
        stream.write(data.decode(encoding, "replace"))
        stream.flush()
        return
    stream.flush()
    view = memoryview(data)
    while view:
        view = view[binary.write(view) or 0 :]
    binary.flush()


_LINK, _SPECIAL = "it is a symbolic link (not followed)", "not a regular file (a FIFO, device or socket is refused)"
_NOT_REGULAR = {errno.ELOOP: _LINK, errno.ENXIO: "it is a FIFO or socket"}


def _write_file(path: str, text: str, append: bool = False) -> str | None:
    """A report file (JUnit, Markdown) is a regular file or nothing: written to a new private file beside it and
    renamed over it (process/atomic.py), so a link planted at its name or at a temporary name is never written
    through; a link, folder, FIFO, device or socket at its name is refused. The step summary, a file CI names,
    is appended to, never through a link, never blocking on a FIFO."""
    from fa_doctor.process.atomic import write_atomic
    from fa_doctor.render.escape import escape

    shown = escape(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG
    except OSError as exc:
        return f"cannot write {shown}: {exc.strerror or exc}"
    if not stat.S_ISREG(mode):
        why = _LINK if stat.S_ISLNK(mode) else "it is a directory" if stat.S_ISDIR(mode) else _SPECIAL
        return f"cannot write {shown}: {why}"
    data = text.encode("utf-8", "backslashreplace")
    try:
        if not append:
            write_atomic(path, data)
            return None
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return f"cannot write {shown}: {_SPECIAL}"
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except OSError as exc:  # a link or FIFO planted after the lstat is refused by the open
        return f"cannot write {shown}: {_NOT_REGULAR.get(exc.errno or 0) or exc.strerror or exc}"
    return None


def deliver(result: Result, out: Outputs, stream: IO[str] | None = None) -> int:
    """Render to the stream and the files; the result's exit code, or 2 when something could not be written."""
    problems: list[str | None] = []
    if stream is None:
        stream = sys.stderr if (result.error and out.format == "human") else sys.stdout
    for path, fmt in ((out.junit, "junit"), (out.markdown, "markdown")):
        if path:
            problems.append(_write_file(path, render(result, fmt)))
    if out.step_summary:
        target = os.environ.get("GITHUB_STEP_SUMMARY")
        if target:
            problems.append(_write_file(target, render(result, "markdown"), append=True))
        else:
            sys.stderr.write("fa-doctor: --step-summary: GITHUB_STEP_SUMMARY is not set; no summary written\n")
    if out.output:  # the report as a file would hold it: no colour, no terminal wrapping
        problems.append(_write_file(out.output, render(result, out.format, verbose=out.verbose, quiet=out.quiet)))
        text = ""
    else:
        color, width, wrap = out.color(stream), _width(stream), _isatty(stream)
        text = render(result, out.format, verbose=out.verbose, color=color, width=width, wrap=wrap, quiet=out.quiet)
    try:
        with _signals_held():  # the report goes out whole; a signal after it ends the run (128+N), no second one
            if text:
                write(stream, text)
            interrupt.finishing()
        interrupt.checkpoint("delivered")
    except BrokenPipeError:  # `fa-doctor check | head`: the reader left; say nothing more
        _silence(stream)
        return EXIT_ERROR
    for problem in filter(None, problems):
        sys.stderr.write(f"fa-doctor: {problem}\n")
    return EXIT_ERROR if any(problems) else result.exit_code


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, interrupt.SIGNALS)
    except (ValueError, OSError):
        old = None
    try:
        yield
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _silence(stream: IO[str]) -> None:
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


def run_and_deliver(
    name: str, run: Run, out: Outputs, early: Any, *, python: str | None, stream: IO[str] | None = None
) -> tuple[int, Result]:
    from fa_doctor.probes.target import TargetError
    from fa_doctor.render.progress import progress_to_stderr

    # fa_doctor.entry started it before the commands loaded; use it when it probes the interpreter this run wants.
    if early is not None and early.python != (python or sys.executable):
        early.close()  # it guessed another interpreter: end its child now, not at exit
        early = None
    try:
        interrupt.checkpoint("run")
        # exec's report is on stderr: a document there (JSON, JUnit, ...) is read whole, so no progress around it.
        silent = out.quiet or (stream is sys.stderr and out.format != "human")
        with progress_to_stderr(color=out.color(sys.stderr), quiet=silent) as progress:
            result = run(progress, early)
    except (TargetError, CannotRun) as exc:
        result = error_result(name, str(exc))
    except interrupt.Interrupted as exc:
        result = interrupted_result(name, exc.signum)
        if out.format != "human":  # the human report says it on stderr itself
            sys.stderr.write(f"fa-doctor: {result.error}\n")
    return deliver(result, out, stream), result


def deliver_fix_override(result: Result, out: Outputs) -> int:
    """`fix --unset-override`: in the human format stdout carries only shell code for `eval` (or, with
    --dry-run, the diffs), and what happened to each env file goes to stderr; other formats as usual."""
    from fa_doctor.model.lines import Lines
    from fa_doctor.model.result import FixPayload
    from fa_doctor.render.boundary import prepare

    payload = result.payload
    if out.format != "human" or not isinstance(payload, FixPayload):
        return deliver(result, out)
    # The diffs and notes carry the env files' own text: escaped like any report, a diff line by line.
    edits = tuple(dataclasses.replace(e, diff=Lines(e.diff.split("\n"))) for e in payload.edits)
    shown = prepare(dataclasses.replace(result, payload=dataclasses.replace(payload, edits=edits)))
    dry_run = payload.dry_run
    if dry_run:  # every line a comment: `eval "$(fa-doctor fix --unset-override --dry-run ...)"` runs nothing
        from fa_doctor.render.shell import as_comments

        code = as_comments("".join(e.diff for e in shown.payload.edits))
    else:
        code = payload.shell_code or ""  # fa-doctor's own code from validated values: for eval
    try:
        if out.output:
            problem = _write_file(out.output, code)
            if problem:
                sys.stderr.write(f"fa-doctor: {problem}\n")
                return EXIT_ERROR
        else:
            write(sys.stdout, code)
    except BrokenPipeError:
        _silence(sys.stdout)
        return EXIT_ERROR
    for f in shown.findings:  # a dry run shows the diffs on stdout; a refusal's reason is still said here
        detail = f" ({f.detail})" if f.detail and not (dry_run and f.id == "fix.edited") else ""
        sys.stderr.write(f"fa-doctor: {f.title}{detail}\n")
    if not dry_run and not out.output and _isatty(sys.stdout) and payload.eval_hint:
        sys.stderr.write(f"fa-doctor: a program cannot change its parent shell; run: {payload.eval_hint}\n")
    return result.exit_code


def confirm(steps: Any) -> bool:
    """Ask on the terminal; without one, --apply needs --yes."""
    from fa_doctor.render.escape import escape

    if not sys.stdin.isatty():
        raise CannotRun("--apply changes the environment: confirm with --yes when not run from a terminal")
    sys.stderr.write("fa-doctor fix will run:\n")
    for number, step in enumerate(steps, 1):
        sys.stderr.write(f"  {number}. {escape(step.description)}\n     {escape(step.command)}\n")
    sys.stderr.write("Apply these steps? [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")
