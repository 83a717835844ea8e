"""Fake FA4 whose CuTe DSL runtime is missing, as after a `pip install --target` (the .pth is never read)."""

import cutlass  # noqa: F401
