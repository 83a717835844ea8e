"""Name the cause of an exception text and its whole __cause__/__context__ chain (sgl_kernel's "Can not import FA3"
hides the real reason there) by the knowledge base's table, so `check` and `explain` give the same diagnosis."""

from __future__ import annotations

from collections.abc import Sequence

from fa_doctor.knowledge.problem import CAUSES, ImportProblem

__all__ = ["CAUSES", "ImportProblem", "classify", "demangle"]


def classify(exc_type: str, message: str, chain: Sequence[str]) -> ImportProblem:
    from fa_doctor.knowledge.classify import classify as by_table

    return by_table(exc_type, message, chain)


def demangle(symbol: str) -> str | None:
    """c++filt's reading of an Itanium symbol (bounded), or None."""
    from fa_doctor.knowledge.extract import demangle as by_cxxfilt

    return by_cxxfilt(symbol)
