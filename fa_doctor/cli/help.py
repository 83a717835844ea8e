"""`--help` and the usage line of an error, written from `fa_doctor.cli.spec`."""

from __future__ import annotations

import os
import sys
import textwrap

from fa_doctor.cli.spec import COMMANDS, FLAG, HELP, MANY, ROOT, Command, Option

_COLUMN = 32


def _width() -> int:
    """The terminal's width (80 to 120 columns), else 80."""
    try:
        if sys.stdout.isatty():
            return max(80, min(120, os.get_terminal_size(sys.stdout.fileno()).columns)) - 1
    except (OSError, ValueError, AttributeError):
        pass
    return 79


def usage(command: Command) -> str:
    if command is ROOT:
        return "Usage: fa-doctor [OPTIONS] COMMAND [ARGS]..."
    words = ["Usage: fa-doctor", command.name, "[OPTIONS]", *(a.metavar for a in command.arguments)]
    return " ".join(words)


def _label(option: Option) -> str:
    label = ", ".join(option.flags)
    return f"{label} {option.metavar}" if option.kind != FLAG and option.metavar else label


def _notes(option: Option) -> str:
    notes = []
    if option.complete and option.complete != "files":  # the valid values, from where they are defined
        import fa_doctor.cli.values as values

        notes.append(f"one of: {', '.join(getattr(values, option.complete)())}")
    if option.env:
        notes.append(f"env var: {option.env}")
    if option.kind not in (FLAG, MANY) and option.default is not None:
        notes.append(f"default: {option.default}")
    return f"  [{'; '.join(notes)}]" if notes else ""


def _rows(rows: list[tuple[str, str]], width: int, column: int = _COLUMN) -> list[str]:
    out: list[str] = []
    for label, text in rows:
        body = textwrap.wrap(text, width - column) or [""]
        if len(label) + 2 >= column - 2:
            out.append(f"  {label}")
            out += [" " * column + line for line in body if line]
        else:
            out.append(f"  {label:<{column - 2}}{body[0]}")
            out += [" " * column + line for line in body[1:]]
    return out


def _paragraph(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width - 2, initial_indent="  ", subsequent_indent="  ")


def render(command: Command) -> str:
    width = _width()
    lines = [usage(command), "", *_paragraph(command.help, width), ""]
    if command.arguments:
        lines.append("Arguments:")
        lines += _rows([(a.metavar, a.help) for a in command.arguments], width)
        lines.append("")
    lines.append("Options:")
    lines += _rows([(_label(o), o.help + _notes(o)) for o in (*command.options, HELP)], width)
    if command is ROOT:
        lines += ["", "Commands:"]
        lines += _rows([(c.name, c.help) for c in COMMANDS.values()], width, column=12)
    lines += ["", *_paragraph(command.epilog, width)]
    return "\n".join(lines) + "\n"


def error(command: Command, message: str) -> str:
    """What a usage error prints on stderr (the human format). The message quotes the command line, which may
    carry anything (a newline and `::error::` into a CI log): escaped onto one line, as every renderer does."""
    from fa_doctor.render.escape import escape

    hint = "fa-doctor -h" if command is ROOT else f"fa-doctor {command.name} -h"
    return f"{usage(command)}\nTry '{hint}' for help.\n\nError: {escape(message)}\n"
