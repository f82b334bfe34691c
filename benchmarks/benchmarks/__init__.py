"""asv benchmarks of fastrag (see benchmarks/README.md)."""
