"""The stubs in exercises/ are generated from solutions/ and carry the whole contract."""

from __future__ import annotations

import ast

import pytest
from submission_tools import COURSE, SOLUTIONS
from submission_tools import STUBS as EXERCISES

from grader.integrations.routes import stubs


def test_committed_stubs_are_fresh():
    expected = stubs.stub_sources()
    for name, text in expected.items():
        assert (EXERCISES / name).read_text() == text, (
            f"exercises/{name} is stale: run `make stubs`"
        )


def _signatures(path):
    """Module-level functions and classes, and methods: their arguments and docstrings."""
    out = {}
    for node in ast.parse(path.read_text()).body:
        members = node.body if isinstance(node, ast.ClassDef) else []
        for item in (node, *members):
            if isinstance(item, (ast.FunctionDef, ast.ClassDef)):
                args = ast.dump(item.args) if isinstance(item, ast.FunctionDef) else ""
                out[f"{node.name}.{item.name}"] = (args, ast.get_docstring(item))
    return out


@pytest.mark.parametrize("name", COURSE.names())
def test_stub_keeps_signatures_and_docstrings(name):
    assert _signatures(EXERCISES / f"{name}.py") == _signatures(SOLUTIONS / f"{name}.py")
    assert "NotImplementedError" in (EXERCISES / f"{name}.py").read_text()


def test_stub_holds_no_solution_code():
    for name in COURSE.names():
        text = (EXERCISES / f"{name}.py").read_text()
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text


def test_unbalanced_markers_are_rejected():
    with pytest.raises(ValueError, match="without END"):
        stubs.strip_solution("def f():\n    ### BEGIN SOLUTION\n    return 1\n", "f")
    with pytest.raises(ValueError, match="without BEGIN"):
        stubs.strip_solution("def f():\n    return 1\n    ### END SOLUTION\n", "f")
