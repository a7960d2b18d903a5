"""attention-kit's grading engine.

The process that imports this package decides grades and never imports student code: a
submission runs in a worker process (``grader.isolation``) reached through ``grader.student``.
"""

from .exercises import EXERCISE_NAMES, EXERCISES

__all__ = ["EXERCISES", "EXERCISE_NAMES"]
