"""Shared fixtures. Helpers for building submissions are in ``submission_tools``."""

from __future__ import annotations

import os

import pytest

# The kit's tests grade with an empty course secret (it reaches the CLI runs they start too):
# the hidden checks then draw what they drew before secrets existed, and the scores recorded in
# tests/zoo/scores.json stay comparable. Tests of the secret itself set their own.
os.environ["ATTENTION_KIT_SECRET"] = ""
from submission_tools import SOLUTIONS


@pytest.fixture(scope="session")
def key_result():
    """The answer key graded once per test session (public and hidden checks)."""
    from grader.core import engine

    return engine.grade_submission(SOLUTIONS)
