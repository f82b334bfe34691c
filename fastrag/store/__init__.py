"""fastrag.store."""
