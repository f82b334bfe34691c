"""Numba kernels of fastrag, installed as ``fastrag._native``.

Kernels take and return plain contiguous numpy arrays and scalars; they import
nothing from fastrag, do no I/O and never raise on user input (the Python
wrappers in ``fastrag`` validate first). Each kernel module has a pure-Python
reference twin in ``tests/naive/``.

:func:`readonly` and :func:`frozen` (from :mod:`._jit`) are public: the
Python side hands arrays to the kernels through them, read-only, the way the
warm-up compiles them.

``KERNEL_ABI`` is saved in every knowledge base manifest; bump it when a
kernel's meaning, signature or dtypes change.
"""

from __future__ import annotations

from ._jit import frozen, readonly

KERNEL_ABI = 1

__all__ = ["KERNEL_ABI", "frozen", "readonly"]
