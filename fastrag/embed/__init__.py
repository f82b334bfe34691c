"""fastrag.embed."""
