"""The one escaping function for text that came from the target, applied where a result enters a renderer.

Metadata, paths, GPU names and exception messages can hold terminal control sequences (`ESC[2K`, OSC titles),
carriage returns that overwrite a line, bidi overrides that reorder it, and lone surrogates from undecodable
bytes. Each becomes a visible `\\xNN`/`\\uNNNN` escape. A line break (`\\n`, and U+2028/U+2029, which some
viewers break on) becomes a visible `\\n`: text from the target never starts a line of a report, so it cannot
pose as a line of fa-doctor's or as a CI runner's command. A report's own line breaks come from the renderer or
from `fa_doctor.model.lines.Lines`, whose parts are escaped one by one.

Two workflow-command shapes of the GitHub runner (actions/runner `ActionCommand`) are defused wherever the text
lands: `::name::` at the start of a line (the runner trims leading blanks first), so a leading `::` loses its
first colon to `\\x3a`; and the old `##[name]` form, read anywhere in a line, loses its `[` to `\\x5b`.
"""

from __future__ import annotations

import re

# C0 controls but \t and \n, DEL, C1 controls, bidi embeddings/overrides/isolates, lone surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# The same, and every line break.
_UNSAFE_OR_BREAK = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_COMMAND_START = re.compile(r"^(\s*):(?=:)")
_LINE_COMMAND_START = re.compile(r"^([^\S\n]*):(?=:)", re.M)
_OLD_COMMAND = "##["


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x0A:
        return "\\n"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str, *, one_line: bool = True) -> str:
    """`one_line=False` is for a format that quotes every string (JSON: no string can span or start a line, and
    its readers need the value): controls are escaped, line breaks and command shapes kept."""
    if not one_line:
        return _UNSAFE.sub(_visible, text)
    text = _UNSAFE_OR_BREAK.sub(_visible, text)
    if ":" in text:
        text = _COMMAND_START.sub(r"\1\\x3a", text, count=1)
    if _OLD_COMMAND in text:
        text = text.replace(_OLD_COMMAND, "##\\x5b")
    return text


def defuse_lines(text: str) -> str:
    """A whole rendered report (not GitHub's, whose `::` lines are its own): no physical line starts with `::`,
    not even one a renderer made by wrapping a long cell in the middle of a path."""
    return _LINE_COMMAND_START.sub(r"\1\\x3a", text) if "::" in text else text
