"""Make reports safe to paste: the home folder becomes ~, secret-looking values and URL credentials are hidden.

Remedy commands are not scrubbed (see render/boundary.py): a command keeps absolute paths, because `~` inside
quotes is never expanded by a shell.
"""

from __future__ import annotations

import os
import re

SECRET_NAME = re.compile(
    r"token|secret|passw|api[_-]?key|access[_-]?key|credential|authorization|auth[_-]?token", re.IGNORECASE
)
# scheme://user:password@host or scheme://token@host
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s'\"]+@")
_PATH_CHAR = r"[\w.~+-]"


def _home() -> str | None:
    home = os.path.expanduser("~").rstrip("/")
    return home if home not in ("", "~") else None


def scrub_text(text: str) -> str:
    text = _URL_CREDENTIALS.sub(r"\g<scheme>***@", text)
    home = _home()
    if home:
        # Only where the home folder starts a path (`/adv/x`, `'/adv/x'`, `=/adv`), not inside one (`/tmp/adv/x`).
        text = re.sub(rf"(?<!{_PATH_CHAR})(?<!/){re.escape(home)}(?=/|$|[^\w.~+-])", "~", text)
    return text
