"""Repairs `fa-doctor fix` performs: the override in the current shell and in env files, and planned actions."""
