"""The explain normaliser against terminal sequences cut off in a paste, and the suite's hypothesis profile."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fa_doctor.knowledge import explain
from fa_doctor.knowledge.match import normalise

ERROR = "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"


@pytest.mark.parametrize(
    "prefix",
    [
        "\x1b]",  # the falsifying example CI found: an OSC introducer and nothing else
        "\x1b]0;",
        "\x1b]0;server log",
        "\x1b]8;;http://example.invalid/",
        "\x1b]2;" + "t" * 600,  # longer than the bound of a terminated OSC
        "\x1b]\x1b[0m",
    ],
)
def test_an_unterminated_osc_does_not_swallow_the_paste(prefix: str) -> None:
    text = prefix + "\n" + ERROR + "\n"
    assert "libcudart.so.12" in normalise(text)
    assert explain(text), "explain found nothing"


def test_an_unterminated_osc_on_the_error_line_keeps_the_error() -> None:
    assert "cannot open shared object file" in normalise("\x1b]" + ERROR)


@pytest.mark.parametrize(
    "text",
    ["\x1b]0;title\x07" + ERROR, "\x1b]8;;http://x\x1b\\" + ERROR + "\x1b]8;;\x1b\\", "\x1b[31m" + ERROR + "\x1b[0m"],
)
def test_terminated_sequences_are_removed_whole(text: str) -> None:
    flat = normalise(text)
    assert flat.startswith("ImportError") and "title" not in flat and "http" not in flat


def test_the_suite_runs_hypothesis_derandomized() -> None:
    assert settings.default.derandomize is True and settings.default.database is None
    assert settings(max_examples=5).derandomize is True  # a test's own @settings inherits it


@given(st.text(max_size=300))
def test_property_any_prefix_keeps_a_following_error_line(noise: str) -> None:
    noise = noise.replace("\r", "").replace("\n", "")
    assert explain(noise + "\n" + ERROR + "\n")
