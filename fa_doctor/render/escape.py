"""The one escaping function for text from the target: controls, bidi overrides, lone surrogates and (but in
JSON) line breaks become visible escapes, and GitHub's workflow-command shapes are defused (docs/render.md)."""

from __future__ import annotations

import re

# C0 controls but \t and \n, DEL, C1 controls, bidi embeddings/overrides/isolates, lone surrogates.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(f"[{_CONTROLS}]")
_UNSAFE_OR_BREAK = re.compile(f"[\n\u2028\u2029{_CONTROLS}]")  # the same, and every line break
_COMMAND_START = re.compile(r"^(\s*):(?=:)")
_LINE_COMMAND_START = re.compile(r"^([^\S\n]*):(?=:)", re.M)
_OLD_COMMAND = "##["


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return "\\n" if code == 0x0A else f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


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
