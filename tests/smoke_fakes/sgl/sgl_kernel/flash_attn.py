"""Like sgl_kernel/flash_attn.py: a bare except hides the real import error in __context__."""

try:
    from sgl_kernel import flash_ops  # noqa: F401
except:  # noqa: E722
    raise ImportError("Can not import FA3 in sgl_kernel. Please check your installation.")  # noqa: B904
