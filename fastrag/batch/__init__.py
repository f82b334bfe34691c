"""fastrag.batch."""
