"""fastrag.index."""
