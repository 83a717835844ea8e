"""The one argument parser: argv (and the FA_DOCTOR_* environment) in, a `Parsed` out, read against
`fa_doctor.cli.spec`. Everything that needs the command line reads it here: the entry's early target probe, the
commands, the format a usage error answers in, `fleet`'s forwarded options and shell completion.

Rules (click's, which fa-doctor's users knew): options and positionals mix, except for exec, where the first
positional or `--` starts COMMAND and nothing after it is fa-doctor's; `--opt=value` or `--opt value` (the next
word is the value whatever it looks like: `--python --json` names a Python called `--json`); short flags
combine (`-vq`); no abbreviations; a repeated option keeps its last value (a MANY option every value); the
command line beats FA_DOCTOR_*, which beats the default; an empty variable counts as unset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fa_doctor.cli.spec import COMMANDS, FLAG, MANY, ROOT, Argument, Command, Option


class UsageError(Exception):
    """Misuse of the command line: exit 2, with the usage line of `command`."""

    def __init__(self, message: str, command: Command = ROOT) -> None:
        super().__init__(message)
        self.message, self.command = message, command


class Parsed:
    __slots__ = ("command", "errors", "given", "help", "values")

    def __init__(self, command: Command) -> None:
        self.command = command
        self.values: dict[str, Any] = {o.dest: o.default for o in command.options}
        self.values.update({a.dest: ([] if a.count in ("+", "rest") else None) for a in command.arguments})
        self.given: dict[str, str] = {}  # dest -> "command line" | the FA_DOCTOR_* variable it came from
        self.help = False
        self.errors: list[UsageError] = []

    def __getitem__(self, dest: str) -> Any:
        return self.values[dest]

    def fail(self, message: str) -> None:
        self.errors.append(UsageError(message, self.command))

    def raise_first(self) -> None:
        if self.errors and not self.help:
            raise self.errors[0]


def parse(argv: Sequence[str], environ: Mapping[str, str], *, resilient: bool = False) -> Parsed:
    """`resilient`: read as much as can be read and keep the errors in `.errors` (for the format a usage error
    answers in, for completion); otherwise the first error is raised as UsageError."""
    args = list(argv)
    root = Parsed(ROOT)
    at = _options(root, args, 0, stop_at_positional=True)
    if root.errors or root.help or at >= len(args) or any(root.values[o.dest] for o in ROOT.options):
        if at >= len(args) and not root.help and not any(root.values[o.dest] for o in ROOT.options):
            root.fail("Missing command.")  # `fa-doctor` alone: the help, on stderr, exit 2
        _finish(root, environ, resilient)
        return root
    command = COMMANDS.get(args[at])
    if command is None:
        root.fail(f"No such command {args[at]!r}." + _suggest(args[at], list(COMMANDS), "commands"))
        _finish(root, environ, resilient)
        return root
    parsed = Parsed(command)
    _options(parsed, args, at + 1, stop_at_positional=command.rest)
    _finish(parsed, environ, resilient)
    return parsed


def _options(parsed: Parsed, args: list[str], at: int, *, stop_at_positional: bool) -> int:
    """Reads options and positionals from args[at:]; returns where it stopped (a root parse stops at the
    command's name, exec at its COMMAND)."""
    command, positionals = parsed.command, []
    only_positionals = False
    while at < len(args):
        token = args[at]
        if only_positionals or token == "-" or not token.startswith("-"):
            if stop_at_positional:
                break
            positionals.append(token)
            at += 1
            continue
        if token == "--":
            at += 1
            if stop_at_positional:
                break
            only_positionals = True
            continue
        at = _option(parsed, args, at)
    if command is not ROOT:
        _positionals(parsed, positionals + (args[at:] if command.rest else []))
        at = len(args)
    return at


def _option(parsed: Parsed, args: list[str], at: int) -> int:
    token, command = args[at], parsed.command
    if token.startswith("--"):
        name, eq, inline = token.partition("=")
        option = command.option(name)
        if option is None:
            parsed.fail(f"No such option: {name}" + _suggest(name, [f for o in command.options for f in o.flags]))
            return at + 1
        if option.kind == FLAG:
            if eq:
                parsed.fail(f"Option {name!r} does not take a value.")
            else:
                _set(parsed, option, True, "command line")
            return at + 1
        if eq:
            _store(parsed, option, name, inline)
            return at + 1
        if at + 1 >= len(args):
            parsed.fail(f"Option {name!r} requires an argument.")
            return at + 1
        _store(parsed, option, name, args[at + 1])
        return at + 2
    for letter in token[1:]:  # -vq: short flags combine; none of fa-doctor's short options takes a value
        option = command.option("-" + letter)
        if option is None or option.kind != FLAG:
            parsed.fail(f"No such option: -{letter}")
            break
        _set(parsed, option, True, "command line")
    return at + 1


def _store(parsed: Parsed, option: Option, name: str, text: str, source: str = "command line") -> None:
    try:
        value = _convert(option.check, text)
    except ValueError as exc:
        where = f" (env var: {source!r})" if source != "command line" else ""
        parsed.fail(f"Invalid value for {name!r}{where}: {exc}")
        return
    if option.kind == MANY:
        value = (*parsed.values[option.dest], value)
    _set(parsed, option, value, source)


def _set(parsed: Parsed, option: Option, value: object, source: str) -> None:
    if option.dest == "help":
        parsed.help = True
        return
    parsed.values[option.dest] = value
    parsed.given[option.dest] = source


def _convert(check: str, text: str) -> object:
    if not check:
        return text
    import fa_doctor.cli.values as values

    return getattr(values, check)(text)


def _positionals(parsed: Parsed, words: list[str]) -> None:
    for argument in parsed.command.arguments:
        if argument.count in ("+", "rest"):
            taken, words = words, []
        else:
            taken, words = words[:1], words[1:]
        if not taken:
            if argument.count != "?":
                parsed.fail(f"Missing argument {argument.metavar.split()[-2 if argument.count == 'rest' else 0]!r}.")
            continue
        _argument(parsed, argument, taken)
    if words:
        parsed.fail(f"Got unexpected extra argument{'s' if len(words) > 1 else ''} ({' '.join(words)})")


def _argument(parsed: Parsed, argument: Argument, taken: list[str]) -> None:
    try:
        converted = [_convert(argument.check, word) for word in taken]
    except ValueError as exc:
        parsed.fail(f"Invalid value for {argument.metavar!r}: {exc}")
        return
    parsed.values[argument.dest] = converted if argument.count in ("+", "rest") else converted[0]
    parsed.given[argument.dest] = "command line"


def _finish(parsed: Parsed, environ: Mapping[str, str], resilient: bool) -> None:
    """FA_DOCTOR_* defaults for what the command line left out; then the first error, unless resilient."""
    for option in parsed.command.options:
        text = environ.get(option.env) if option.env else None
        if not text or option.dest in parsed.given:
            continue
        if option.kind == FLAG:
            from fa_doctor.cli.values import boolean

            try:
                parsed.values[option.dest] = boolean(text)
                parsed.given[option.dest] = option.env
            except ValueError as exc:
                parsed.fail(f"Invalid value for {option.name!r} (env var: {option.env!r}): {exc}")
        else:
            _store(parsed, option, option.name, text, option.env)
    if not resilient:
        parsed.raise_first()


def _suggest(word: str, choices: list[str], kind: str = "options") -> str:
    import difflib

    close = difflib.get_close_matches(word, choices, n=2)
    return f" (Possible {kind}: {', '.join(close)})" if close else ""


def requested_format(argv: Sequence[str], environ: Mapping[str, str]) -> str:
    """The format asked for, read as the command reads it (values skipped, nothing after `--` or exec's COMMAND):
    a usage error still answers in that format."""
    parsed = parse(argv, environ, resilient=True)
    if parsed.values.get("json") is True:
        return "json"
    fmt = parsed.values.get("format")
    from fa_doctor.render.base import FORMATS

    return fmt if isinstance(fmt, str) and fmt in FORMATS else "human"


def forwarded(parsed: Parsed) -> tuple[str, ...]:
    """The check options given to this command (`fleet`), as command-line words for each node's check."""
    argv: list[str] = []
    for option in parsed.command.options:
        value = parsed.values[option.dest]
        if not option.forward or option.dest not in parsed.given:
            continue
        if option.kind == FLAG:
            argv += [option.name] if value else []
        elif option.dest == "timeout":
            argv += [option.name, repr(float(value))]
        else:
            argv += [option.name, str(value)]
    return tuple(argv)
