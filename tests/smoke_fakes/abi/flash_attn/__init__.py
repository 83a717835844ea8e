"""Fake FA2 whose compiled extension was built against another torch (the tests compile it with gcc)."""

import flash_attn_2_cuda  # noqa: F401
