"""The key's answers to a file's proxy calls (``student._KeyAnswers``): a question the file asked
before is answered as the key answered it then, without asking the key's worker again; the
same value (a new copy each time), the same complaint, never a lost worker's reply, and no
more than ``MAX_BYTES`` kept. Grading a wrong attention, which asks the same proxy questions
again as its failing checks shrink, gives the same result with and without them."""

from __future__ import annotations

import tracemalloc
import types

import numpy as np
import pytest
from submission_tools import SOLUTIONS, make_submission

from grader.core import engine, student
from grader.core.course import EXERCISES_BY_NAME, load
from grader.sandbox import protocol
from grader.sandbox.errors import StudentError, WorkerLost
from grader.sandbox.isolation import Limits

ATTENTION = EXERCISES_BY_NAME()["attention"]


class _KeyWorker:
    """Stands for the key's answer worker: counts the questions it is asked."""

    def __init__(self, answer):
        self.answer = answer  # a value, or an exception to raise
        self.asked = 0
        self.last_frame = b""
        self.used = 0.0

    def request(self, op, **kwargs):
        self.asked += 1
        if isinstance(self.answer, WorkerLost):
            raise self.answer
        if isinstance(self.answer, StudentError):
            reply = {"ok": False, "error": self.answer.info, "id": self.asked}
        else:
            reply = {"ok": True, "value": self.answer, "id": self.asked}
        self.last_frame = protocol.encode(reply)[8:]
        if isinstance(self.answer, StudentError):
            raise StudentError(self.answer.info)
        return protocol.decode(self.last_frame)["value"]


def _asking(monkeypatch, answer):
    key = _KeyWorker(answer)
    monkeypatch.setattr(student, "answerer", lambda folder, exercise, limits: key)
    file = student.Student(types.SimpleNamespace(limits=Limits()), ATTENTION,
                           key_folder=SOLUTIONS)
    return key, file


QUESTION = {"ask": "softmax", "function": "softmax", "args": [np.arange(6.0).reshape(2, 3)],
            "kwargs": {"axis": -1}}


def test_a_repeated_question_is_answered_once_by_the_key(monkeypatch):
    key, file = _asking(monkeypatch, np.full((2, 3), 0.25))
    first = file._answer(QUESTION)
    first["value"][0, 0] = 99.0  # whoever holds an answer may change it
    second = file._answer(QUESTION)
    assert key.asked == 1
    assert second["ok"] is True and np.array_equal(second["value"], np.full((2, 3), 0.25))
    other = {**QUESTION, "args": [np.arange(6.0).reshape(3, 2)]}
    file._answer(other)
    assert key.asked == 2  # another question goes to the key


def test_the_keys_complaint_is_given_again(monkeypatch):
    key, file = _asking(monkeypatch, StudentError({"type": "ValueError", "message": "no",
                                                   "value_error": True}))
    replies = [file._answer(QUESTION) for _ in range(3)]
    assert key.asked == 1
    assert all(r == {"ok": False, "error": {"type": "ValueError", "message": "no"}}
               for r in replies)


def test_a_lost_key_worker_is_asked_again(monkeypatch):
    key, file = _asking(monkeypatch, WorkerLost("out of memory"))
    for _ in range(2):
        reply = file._answer(QUESTION)
        assert reply["ok"] is False and "could not compute" in reply["error"]["message"]
    assert key.asked == 2


def test_no_more_than_max_bytes_kept(monkeypatch):
    monkeypatch.setattr(student._KeyAnswers, "MAX_BYTES", 4096)
    key, file = _asking(monkeypatch, np.zeros(1000))  # 8 KB an answer: none fits
    for _ in range(3):
        file._answer(QUESTION)
    assert key.asked == 3
    assert file.__dict__["_key_answers"].bytes == 0


def test_what_is_kept_holds_no_more_than_it_counts():
    """Tens of thousands of tiny answers (the red team's fill: 63-byte questions, 117-byte
    replies) hold no more memory than the cap counts: each entry is counted with its cost."""
    for question_bytes, reply_bytes in ((63, 117), (10, 10), (200, 300)):
        tracemalloc.start()
        try:
            answers, index = student._KeyAnswers(), 0
            while True:
                tag = index.to_bytes(8, "little")
                before = answers.bytes
                answers.keep(b"q" * question_bytes + tag, b"r" * reply_bytes + tag)
                if answers.bytes == before:
                    break
                index += 1
            held = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert index > 1000
        assert answers.bytes <= answers.MAX_BYTES
        assert held <= answers.bytes, (question_bytes, reply_bytes, held, answers.bytes)


def test_a_big_or_deep_question_is_not_looked_up(monkeypatch):
    """A question over ``MAX_QUESTION``, or nested deeper than its size is read, is neither
    encoded for a look-up nor kept: its bytes are made once, to send it, as before."""
    answers = student._KeyAnswers()
    big = np.zeros(answers.MAX_QUESTION // 8 + 1)
    assert answers.question("softmax", "softmax", "", [big], {}) is None
    deep = [np.zeros(4)]
    for _ in range(12):
        deep = [deep]
    assert answers.question("softmax", "softmax", "", deep, {}) is None
    assert answers.question("softmax", "softmax", "", [np.zeros(4)], {"axis": -1}) is not None
    key, file = _asking(monkeypatch, np.zeros(4))
    looked_up = []  # the look-up's encoding: a list that starts with the exercise's name
    real = student.protocol.encode
    monkeypatch.setattr(student.protocol, "encode", lambda value: looked_up.append(
        isinstance(value, list) and value[:1] == ["softmax"]) or real(value))
    for _ in range(2):
        file._answer({**QUESTION, "args": [big]})
    assert key.asked == 2 and not any(looked_up)
    file._answer(QUESTION)
    assert any(looked_up)  # a small one is looked up


@pytest.mark.xdist_group("key_answers")
def test_a_pass_keeps_its_replies_as_bytes(tmp_path, monkeypatch):
    """What an exercise's pass keeps for the checks is each reply's bytes, decoded when a check
    reads it: decoded, a reply can hold many times its bytes (a tuple of empty 64-dimensional
    arrays: about 5.8 times), and the phase's 32 MiB counts bytes."""
    kept = []  # the outcomes as the pass gave them (the checks take them out as they read)
    real = student.Student.serve
    monkeypatch.setattr(student.Student, "serve", lambda self, served: kept.append(
        {question: list(found) for question, found in served.items()}) or real(self, served))
    folder = make_submission(tmp_path / "key", base=SOLUTIONS)
    engine.grade_submission(folder, course=load(), exercises=["softmax"], jobs=1)
    outcomes = [o for served in kept for found in served.values() for o in found]
    assert outcomes
    assert all(type(part) in (str, bytes, int) for o in outcomes for part in o), outcomes[:3]


@pytest.mark.xdist_group("key_answers")
def test_a_wrong_attention_grades_the_same_without_them(tmp_path, monkeypatch):
    """A wrong attention (unscaled scores) asks the key the same softmax questions again as
    its checks shrink: the result is byte for byte the one every question asked afresh
    gives, and the key's worker is asked fewer questions."""
    key_attention = (SOLUTIONS / "attention.py").read_text()
    assert " / np.sqrt(d_k)" in key_attention
    folder = make_submission(tmp_path / "wrong", {
        "attention.py": key_attention.replace(" / np.sqrt(d_k)", "")})
    course = load()
    asked = {"kept": 0, "afresh": 0}
    results = {}
    real = student.answerer  # asked for the key's worker only where no answer is kept
    for way in ("kept", "afresh"):
        with monkeypatch.context() as patched:
            if way == "afresh":
                patched.setattr(student._KeyAnswers, "keep", lambda self, q, f: None)

            def counting(*args, way=way):
                asked[way] += 1
                return real(*args)

            patched.setattr(student, "answerer", counting)
            result = engine.grade_submission(folder, course=course, exercises=["attention"],
                                             jobs=1)
        results[way] = result.exercises["attention"]
    assert results["kept"].to_dict() == results["afresh"].to_dict()
    assert results["kept"].score < ATTENTION.points
    assert asked["kept"] < asked["afresh"] / 2, asked
