"""fastrag.answer."""
