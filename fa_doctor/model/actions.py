"""A remedy as typed actions. Every value may come from the target and is hostile: render/shell.py quotes each
argument for its shell, and `fix --apply` runs the same actions' argv, no shell."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, fields
from typing import Any, Union, cast, get_args

from fa_doctor.catalog.knobs import OVERRIDE

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# pip reads a constraints file; the printed command streams the pins through stdin so it stays one line.
CONSTRAINTS_STDIN = "/dev/stdin"


def _name(name: str) -> None:
    if not _NAME.match(name):
        raise ValueError(f"not an environment variable name: {name!r}")


def _text(what: str, *values: str) -> None:
    if any("\0" in value for value in values):
        raise ValueError(f"{what} contains a NUL byte")


def _words(values: tuple[str, ...], what: str, nul: str, breaks: str = "\n\r") -> None:
    """pip arguments: one line each, and none that starts with `-` (pip would read `--index-url=...` as an option)."""
    for value in values:
        if not value or value.startswith("-") or any(c in value for c in breaks):
            raise ValueError(f"not a {what}: {value!r}")
        _text(nul, value)


def _absolute(path: str, what: str) -> str:
    _text(what, path)
    if not posixpath.isabs(path):
        raise ValueError(f"{what} must be an absolute path: {path!r}")
    return posixpath.normpath(path)


class _Step:
    """What every action has: its JSON form (its kind and fields), which a renderer asks for with `to_dict()`."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return to_dict(cast("Action", self))


@dataclass(frozen=True, slots=True)
class SetEnv(_Step):
    """Set a variable in the current shell (for the server started from it)."""

    name: str
    value: str

    def __post_init__(self) -> None:
        _name(self.name)
        _text("value", self.value)


@dataclass(frozen=True, slots=True)
class UnsetEnv(_Step):
    name: str

    def __post_init__(self) -> None:
        _name(self.name)


@dataclass(frozen=True, slots=True)
class PipInstall(_Step):
    """`<python> -m pip install [options] [-c constraints] requirements`; `constraints` (the server's pins) go to pip
    as a constraints file, so the resolver may not move them; `env` is for this command only (`MAX_JOBS`)."""

    python: str
    requirements: tuple[str, ...]
    options: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _absolute(self.python, "python")
        if not self.requirements:
            raise ValueError("pip install needs at least one requirement")
        _words(self.requirements, "requirement", "requirement")
        _text("option", *self.options)
        # Option values follow their option (`--index-url URL`); the first word must be an option.
        if self.options and not self.options[0].startswith("-"):
            raise ValueError(f"options must start with an option: {self.options[0]!r}")
        _words(self.constraints, "constraint", "constraint")
        for key, value in self.env:
            _name(key)
            _text("value", value)

    @property
    def argv(self) -> tuple[str, ...]:
        constraints = ("-c", CONSTRAINTS_STDIN) if self.constraints else ()
        return (self.python, "-m", "pip", "install", *self.options, *constraints, *self.requirements)


@dataclass(frozen=True, slots=True)
class PipUninstall(_Step):
    python: str
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        _absolute(self.python, "python")
        if not self.names:
            raise ValueError("pip uninstall needs a name")
        _words(self.names, "distribution name", "name", breaks="\n")

    @property
    def argv(self) -> tuple[str, ...]:
        return (self.python, "-m", "pip", "uninstall", "-y", *self.names)


@dataclass(frozen=True, slots=True)
class MovePath(_Step):
    """Move a stray folder or file aside to a named backup, never delete it. The path must lie strictly inside
    `root` (the site folder or working directory the finding is about), never the root itself or above it."""

    path: str
    backup: str
    root: str

    def __post_init__(self) -> None:
        for name in ("path", "backup", "root"):
            object.__setattr__(self, name, _absolute(getattr(self, name), name))
        path, backup, root = self.path, self.backup, self.root
        if posixpath.dirname(path) == path or not _strictly_inside(path, root):
            raise ValueError(f"{path!r} is not inside {root!r}")
        if not _strictly_inside(backup, root) or backup == path:
            raise ValueError(f"backup {backup!r} must be beside the path, inside {root!r}")

    @property
    def argv(self) -> tuple[str, ...]:
        return ("mv", "-n", "--", self.path, self.backup)


def _strictly_inside(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path != root and path.startswith(root.rstrip("/") + "/")


def move_aside(path: str, root: str) -> MovePath:
    """Beside the path, under a name Python cannot import."""
    return MovePath(path, posixpath.normpath(path) + ".fa-doctor-backup", root)


@dataclass(frozen=True, slots=True)
class RunCommand(_Step):
    """Any other command, as argv (`nvidia-smi`, `fa-doctor check`, `python -c ...`)."""

    argv: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.argv or not self.argv[0]:
            raise ValueError("empty command")
        _text("argument", *self.argv)


@dataclass(frozen=True, slots=True)
class EditFile(_Step):
    """Remove a variable's line from a file (`value` None) or rewrite it to `value`: done by `fa-doctor fix`."""

    path: str
    variable: str
    value: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", _absolute(self.path, "path"))
        _name(self.variable)
        if self.value is not None:
            _text("value", self.value)

    @property
    def argv(self) -> tuple[str, ...]:
        if self.variable != OVERRIDE:
            raise ValueError(f"fa-doctor fix edits only {OVERRIDE}, not {self.variable}")
        tail = ("--set", self.value) if self.value is not None else ()
        return ("fa-doctor", "fix", "--unset-override", *tail, "--env-file", self.path)


# A clone URL fa-doctor will hand to git: https only (no `ext::`, `file://`, `--upload-pack=`), no odd characters.
_CLONE_URL = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]+)?/[A-Za-z0-9._~/+-]*\Z")
_SUBDIR = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(?:/[A-Za-z0-9_][A-Za-z0-9._-]*)*\Z")
CLONE_DIR = "src"  # the checkout's name inside the fresh temporary folder


@dataclass(frozen=True, slots=True)
class BuildFromClone(_Step):
    """Build and install `subdir` of a fresh shallow clone of `repo` in a temporary folder only this run owns
    (`mktemp -d`, 0700, the working directory): no file of the caller's directory (a planted `setup.py`) is read."""

    python: str
    repo: str
    subdir: str
    options: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not _CLONE_URL.match(self.repo):
            raise ValueError(f"not an https git URL fa-doctor clones: {self.repo!r}")
        if not _SUBDIR.match(self.subdir) or ".." in self.subdir.split("/"):
            raise ValueError(f"not a folder inside the checkout: {self.subdir!r}")
        _ = self.install  # the pip step's own rules hold too

    @property
    def requirement(self) -> str:
        """What pip installs, relative to the temporary folder (the working directory of the build)."""
        return f"./{CLONE_DIR}/{self.subdir}"

    @property
    def clone_argv(self) -> tuple[str, ...]:
        return ("git", "clone", "--depth", "1", "--", self.repo, CLONE_DIR)

    @property
    def install(self) -> PipInstall:
        """The pip step, run in the temporary folder after the clone."""
        return PipInstall(self.python, (self.requirement,), self.options, self.constraints, self.env)


Action = Union[SetEnv, UnsetEnv, PipInstall, PipUninstall, MovePath, RunCommand, EditFile, BuildFromClone]

# An action's `kind` in JSON: its class name in kebab case (set-env, pip-install, ...), RunCommand's "run".
KINDS: dict[type[Any], str] = {cls: re.sub(r"(?<!^)(?=[A-Z])", "-", cls.__name__).lower() for cls in get_args(Action)}
KINDS[RunCommand] = "run"


def to_dict(action: Action) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": KINDS[type(action)]}
    for f in fields(action):
        value = getattr(action, f.name)
        out[f.name] = dict(value) if f.name == "env" else list(value) if isinstance(value, tuple) else value
    return out


def runnable(action: Action) -> bool:
    """A repair a child process can carry out (a variable of the calling shell and a diagnostic are the user's)."""
    return not isinstance(action, (SetEnv, UnsetEnv, RunCommand))
