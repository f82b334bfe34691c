"""fastrag.models."""
