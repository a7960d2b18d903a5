"""Shared fixtures. Helpers for building submissions are in ``submission_tools``."""

from __future__ import annotations

import pytest
from submission_tools import SOLUTIONS


@pytest.fixture(scope="session")
def key_result():
    """The answer key graded once per test session (public and hidden checks)."""
    from grader.core import engine

    return engine.grade_submission(SOLUTIONS)
