"""The one escaping function for text that came from the target, applied where a result enters a renderer.

Metadata, paths, GPU names and exception messages can hold terminal control sequences (`ESC[2K`, OSC titles),
carriage returns that overwrite a line, bidi overrides that reorder it, and lone surrogates from undecodable
bytes. Each becomes a visible `\\xNN`/`\\uNNNN` escape; newlines and tabs stay (details span lines).
"""

from __future__ import annotations

import re

# C0 controls but \t and \n, DEL, C1 controls, bidi embeddings/overrides/isolates, lone surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    return _UNSAFE.sub(_visible, text)
