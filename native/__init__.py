"""Numba kernels of fastrag, installed as ``fastrag._native``.

Kernels take and return plain contiguous numpy arrays and scalars; they import
nothing from fastrag, do no I/O and never raise on user input (the Python
wrappers in ``fastrag`` validate first). Each kernel module has a pure-Python
reference twin in ``tests/naive/``.

``KERNEL_ABI`` is saved in every knowledge base manifest; bump it when a
kernel's meaning, signature or dtypes change.
"""

from __future__ import annotations

KERNEL_ABI = 1

__all__ = ["KERNEL_ABI"]
