"""The grading engine: courses, exercise declarations, checks, comparisons and diagnosis."""
