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


# -- writing them never destroys work (issue 45: make stubs replaced a finished softmax.py) ------
def test_writing_stubs_refuses_a_changed_file_and_writes_nothing(tmp_path):
    target, record = tmp_path / "exercises", tmp_path / "build" / "stubs.json"
    assert {w.path.name for w in stubs.write_stubs(target=target, record=record)} == set(
        stubs.stub_sources())
    finished = "def softmax(logits, axis=-1):\n    return 'my work'\n"
    (target / "softmax.py").write_text(finished)
    (target / "heads.py").unlink()  # a missing file is the kit's to write
    with pytest.raises(stubs.ChangedStubs) as refused:
        stubs.write_stubs(target=target, record=record)
    assert refused.value.paths == [target / "softmax.py"]
    assert "softmax.py" in str(refused.value) and "FORCE=1" in str(refused.value)
    assert (target / "softmax.py").read_text() == finished
    assert not (target / "heads.py").exists()


def test_force_keeps_the_changed_file_beside_the_stub(tmp_path):
    target, record = tmp_path / "exercises", tmp_path / "stubs.json"
    stubs.write_stubs(target=target, record=record)
    for work in ("first", "second"):
        (target / "softmax.py").write_text(work)
        written = stubs.write_stubs(target=target, record=record, force=True)
        assert [(w.path.name, w.kept.name) for w in written] == [
            ("softmax.py", "softmax.py.orig" if work == "first" else "softmax.py.orig.1")]
    assert (target / "softmax.py.orig").read_text() == "first"
    assert (target / "softmax.py.orig.1").read_text() == "second"
    assert (target / "softmax.py").read_text() == stubs.stub_sources()["softmax.py"]


def test_a_stub_the_kit_wrote_is_replaced_when_the_solution_changes(tmp_path, monkeypatch):
    """What the kit last wrote is its own to replace (the record says so), however the
    solution it came from has changed since."""
    target, record = tmp_path / "exercises", tmp_path / "stubs.json"
    stubs.write_stubs(target=target, record=record)
    sources = stubs.stub_sources()
    changed = {**sources, "softmax.py": sources["softmax.py"] + "# a new line\n"}
    monkeypatch.setattr(stubs, "stub_sources", lambda course=None: changed)
    assert [w.path.name for w in stubs.write_stubs(target=target, record=record)] == [
        "softmax.py"]
    assert (target / "softmax.py").read_text() == changed["softmax.py"]
    # without the record, a file that is not the stub of today is someone's
    record.unlink()
    monkeypatch.setattr(stubs, "stub_sources", lambda course=None: sources)
    with pytest.raises(stubs.ChangedStubs):
        stubs.write_stubs(target=target, record=record)


def test_the_stubs_command_names_the_file_and_exits_1(tmp_path, monkeypatch, capsys):
    from grader.integrations.routes import cli

    monkeypatch.setattr(stubs, "EXERCISES", tmp_path / "exercises")
    monkeypatch.setattr(stubs, "RECORD", tmp_path / "build" / "stubs.json")
    stubs.write_stubs()
    (tmp_path / "exercises" / "mha.py").write_text("work")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["stubs"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: not replacing exercises/mha.py: it differs") and (
        "exercises/mha.py.orig" in err)
    assert cli.main(["stubs", "--force"]) == 0
    assert capsys.readouterr().out == (
        "wrote exercises/mha.py (the file it replaced is kept as exercises/mha.py.orig)\n")
