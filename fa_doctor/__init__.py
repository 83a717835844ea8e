"""fa-doctor: diagnose FlashAttention installs before an LLM server starts."""

__version__ = "0.1.0"
