"""Ways in for large runs: answer files, Ray Data (:mod:`.distributed`), evaluation."""
