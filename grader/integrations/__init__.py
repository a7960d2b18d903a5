"""Everything built on the engine, by whom it serves: ``routes`` (how a submission reaches the
grader, and the handout) and ``outputs`` (what a grade is rendered as)."""
