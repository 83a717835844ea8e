"""Make reports safe to paste: the home folder becomes ~, secret-looking values are hidden."""

from __future__ import annotations

import os
import re
from typing import Any

_SECRET_NAME = re.compile(r"token|secret|passw|api[_-]?key|access[_-]?key|credential", re.IGNORECASE)


def _home() -> str | None:
    home = os.path.expanduser("~")
    return home if home not in ("", "/", "~") else None


def scrub_text(text: str) -> str:
    home = _home()
    if home:
        text = re.sub(re.escape(home) + r"(?=/|\b|$)", "~", text)
    return text


def scrub_tree(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {
            k: ("<hidden>" if _SECRET_NAME.search(str(k)) and isinstance(v, str) else scrub_tree(v, str(k)))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [scrub_tree(v, key) for v in value]
    if isinstance(value, str):
        return scrub_text(value)
    return value
