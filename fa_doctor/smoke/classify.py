"""Turn an exception text (and its __cause__/__context__ chain) into a named cause a user can act on.

The rules are the knowledge base's (fa_doctor/knowledge/errors.json, the table `fa-doctor explain` matches
pasted errors against), so a smoke-test failure in `check` and the same text pasted into `explain` get the
same diagnosis. This module keeps the smoke test's contract: `ImportProblem` and its `CAUSES`. The whole chain
is matched, not only the outermost message: a wrapper such as sgl_kernel's "Can not import FA3" hides the real
reason in __context__.
"""

from __future__ import annotations

from collections.abc import Sequence

# The smoke test's contract lives with the table that fills it (knowledge imports nothing of smoke).
from fa_doctor.knowledge.problem import CAUSES, ImportProblem

__all__ = ["CAUSES", "ImportProblem", "classify", "demangle"]


def classify(exc_type: str, message: str, chain: Sequence[str]) -> ImportProblem:
    from fa_doctor.knowledge.classify import classify as by_table

    return by_table(exc_type, message, chain)


def demangle(symbol: str) -> str | None:
    """c++filt's reading of an Itanium symbol (bounded), or None."""
    from fa_doctor.knowledge.extract import demangle as by_cxxfilt

    return by_cxxfilt(symbol)
