"""Ways in for large runs: answer files (:mod:`.files`), Ray Data (:mod:`.distributed`), evaluation."""
