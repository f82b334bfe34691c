"""fastrag.text."""
