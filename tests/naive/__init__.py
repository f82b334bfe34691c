"""Pure-Python reference twins of every kernel in ``fastrag._native``.

Each submodule mirrors one kernel module; tests compare the two. The
references favour obviousness over speed: they are the specification.
"""
