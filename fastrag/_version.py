"""The version of fastrag (one place; the distribution metadata must agree)."""

__version__ = "0.1.0"
