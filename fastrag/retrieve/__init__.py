"""fastrag.retrieve."""
