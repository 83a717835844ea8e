"""Derived facts: what follows from the probes alone (inventory states, the selection), computed once,
between probes and checks. Nothing here produces a finding."""
