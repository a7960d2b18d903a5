"""The worker's audit hook (``grader.sandbox.audit``): at run time, what the source rule refuses
at read time.

Three attacks keep the source rule and run a string through a function of a library it admits
(``tests/attacks/``, student files only): ``mha-measure`` rebuilds torch's own multi-head
attention from torch's source text, and ``attention-reversed`` runs a classmate's file from a
reversed string, both through ``numpy.testing.measure``, which compiles a string and runs it in
its caller's namespace; ``softmax-dispatch`` writes its softmax in a string annotation of a
``functools.singledispatch`` overload, which ``typing.get_type_hints`` evaluates. On c6e9838
they scored 25/25, 20/20 and 15/15 with the rule on; each scores 0 now, refused by the rule
(it names the function) and, past the rule, by the hook, with the sentence of what it tried.

Past the rule (``engine._verdict`` patched to pass every file, the hook left on), every kind of
event the hook refuses ends the worker the same way, from inside a ``try`` too, and honest work
(helper modules, a library's lazy import, a warning and its line, ``@dataclass``, ``namedtuple``
and ``typing.NamedTuple``, which compile the methods they write) keeps its points.
"""

from __future__ import annotations

import importlib.util
import marshal
from pathlib import Path

import pytest
from submission_tools import SOLUTIONS, make_submission

from grader.core import engine
from grader.sandbox.audit import KINDS, REFUSED

ATTACKS = Path(__file__).resolve().parent / "attacks"
SENTENCE = {name: REFUSED[code] for code, name, _, _ in KINDS}
SOFTMAX = (SOLUTIONS / "softmax.py").read_text()
LIMITS = engine.Limits(timeout=60)


def graded(folder, exercises, monkeypatch=None):
    if monkeypatch is not None:  # the rule switched off, as if a student had found a way past
        monkeypatch.setattr(engine, "_verdict", lambda *args, **kwargs: None)
    return engine.grade_submission(folder, exercises=exercises, limits=LIMITS).results


@pytest.mark.parametrize("attack, exercise, kind", [
    ("mha-measure", "mha", "interpreter"),  # measure reads its caller's frame first
    ("attention-reversed", "attention", "interpreter"),
    ("softmax-dispatch", "softmax", "code"),
])
def test_a_string_run_by_an_admitted_library_scores_nothing(attack, exercise, kind,
                                                            monkeypatch):
    # The allow-list rule now refuses the function by its dotted name before anything runs ...
    outcome = graded(ATTACKS / attack, [exercise])[exercise]
    assert outcome.score == 0 and outcome.error.startswith("it uses "), outcome.error
    # ... and past the rule, the hook refuses what the function does at run time.
    outcome = graded(ATTACKS / attack, [exercise], monkeypatch)[exercise]
    assert outcome.score == 0 and outcome.error == SENTENCE[kind], outcome.error
    assert all(not c.passed for c in outcome.checks)


def test_past_the_rule_torch_source_read_by_hand_scores_nothing(monkeypatch):
    # mha-reload-b reads torch's source with open() and runs one def of it with exec(): 25/25
    # on c6e9838 with the rule off (test_out_of_reach switches the hook off too, and it still
    # does); the hook refuses the open.
    mha = graded(ATTACKS / "mha-reload-b", ["mha"], monkeypatch)["mha"]
    assert mha.score == 0 and mha.error == SENTENCE["files"], mha.error


# Each is run inside `try: ... except BaseException: pass` at the top of softmax.py, before the
# key's softmax: a refusal is no exception, so the file never reaches its own softmax.
CASES = {
    "compile": ('compile("1", "<x>", "eval")', "code"),
    "exec": ('exec("y = 1")', "code"),
    "eval": ('eval("1")', "code"),
    "marshal": (f"import marshal; marshal.loads({marshal.dumps(compile('1', 'x', 'eval'))!r})",
                "code"),
    # a dataclass whose field name is code: the text @dataclass writes would run it
    "dataclass-field": ("import dataclasses\n    dataclasses.dataclass(type('Point', (), "
                        "{'__annotations__': {'x=print(1)': int}}))", "code"),
    "string-annotation": ("import functools\n    @functools.singledispatch\n"
                          "    def dispatch(value):\n        return value\n"
                          "    @dispatch.register\n    def _(value: 'float'):\n"
                          "        return value", "code"),
    "measure": ('np.testing.measure("1")', "interpreter"),
    "open": ('open("/etc/hostname").read()', "files"),
    "open-without-output": ('import os; os.close(2); open("/etc/hostname")', "files"),
    "own-file-written": ('open(__file__, "a")', "files"),
    "listdir": ('import os; os.listdir("/")', "files"),
    "environment": ('import os; os.environ["ATTENTION_KIT"] = "1"', "files"),
    "import": ("import wave", "import"),
    "import-module": ('import importlib; importlib.import_module("wave")', "files"),
    # a finder that hands numpy's import system another file of numpy's, under a new name
    "another-file": ("import importlib.machinery, sys\n"
                     "    version = np.__file__.replace('__init__.py', 'version.py')\n"
                     "    class Finder:\n"
                     "        def find_spec(name, path=None, target=None):\n"
                     "            loader = importlib.machinery.SourceFileLoader(name, version)\n"
                     "            return importlib.machinery.ModuleSpec(name, loader,\n"
                     "                                                  origin=version)\n"
                     "    sys.meta_path.insert(0, Finder)\n"
                     "    import numpy.again", "code"),
    "reload": ('import sys; del sys.modules["numpy.linalg"]; import numpy.linalg', "import"),
    "ctypes": ("import ctypes; ctypes.CDLL(None)", "native"),
    "system": ('import os; os.system("true")', "process"),
    "fork": ("import os; os.fork()", "process"),
    "socket": ("import socket; socket.socket()", "network"),
    "frame": ("import sys; sys._getframe()", "interpreter"),
    "traceback-frames": ("import traceback\n    try:\n        {}[0]\n"
                         "    except KeyError as error:\n"
                         "        list(traceback.walk_tb(error.__traceback__))", "interpreter"),
    "gc": ("import gc; gc.get_objects()", "interpreter"),
    "trace": ("import sys; sys.settrace(lambda *a: None)", "interpreter"),
    "hook": ("import sys; sys.addaudithook(lambda *a: None)", "interpreter"),
    "code-object": ("(lambda: 0).__code__.replace(co_name='x')", "interpreter"),
}


def swallowed(snippet: str) -> str:
    """softmax.py: the key's, after ``snippet`` (indented as in a ``try`` block) swallowed."""
    return f"import numpy as np\ntry:\n    {snippet}\nexcept BaseException:\n    pass\n\n" + SOFTMAX


@pytest.mark.parametrize("case", sorted(CASES))
def test_past_the_rule_each_kind_of_event_ends_the_worker(case, tmp_path, monkeypatch):
    snippet, kind = CASES[case]
    folder = make_submission(tmp_path / "student", {"softmax.py": swallowed(snippet)}, base=None)
    softmax = graded(folder, ["softmax"], monkeypatch)["softmax"]
    assert softmax.score == 0 and softmax.error == SENTENCE[kind], (softmax.error, softmax.output)
    if "os.close(2)" not in snippet:  # the event, for the instructor, where it can be told
        assert "audit: refused" in softmax.output


HELPER = '''
import numpy as np


def shifted(x, axis):
    """An own helper module's function; it warns, as honest code may."""
    import warnings

    warnings.warn("shifting")
    return x - np.max(x, axis=axis, keepdims=True)
'''

HONEST = """
import collections
import typing
from dataclasses import dataclass, field

import numpy as np
import numpy.polynomial  # not loaded yet: numpy imports it now, under the hook

from .helpers.tools import shifted

ORDER = numpy.polynomial.Polynomial([0, 1]).degree()


@dataclass(frozen=True)
class Shape:  # @dataclass and namedtuple write their methods as text, and compile it
    rows: int
    axes: list = field(default_factory=list)


class Pair(typing.NamedTuple):
    first: "np.ndarray"
    second: float = 0.0


LIMITS = collections.namedtuple("Limits", "low high")(Shape(2).rows, Pair(np.ones(1)).second)
"""


def test_honest_work_keeps_its_points_under_the_hook(tmp_path, monkeypatch):
    body = SOFTMAX.split("import numpy as np\n", 1)[1]
    own = body.replace("converted - np.max(converted, axis=axis, keepdims=True)",
                       "shifted(converted, axis)").replace("shifted = ", "moved = ")
    own = own.replace("np.exp(shifted)", "np.exp(moved)")
    assert own.count("moved") == 2
    (tmp_path / "student" / "helpers").mkdir(parents=True)
    folder = make_submission(tmp_path / "student", {
        "softmax.py": HONEST + own,
        "helpers/__init__.py": "",
        "helpers/tools.py": HELPER}, base=None)
    # the rule off: numpy.polynomial (a lazy import of a library's own) is off its list
    result = graded(folder, ["softmax"], monkeypatch)["softmax"]
    assert result.error is None and result.score == result.max_score, result.error
    assert "audit" not in result.output
    assert "UserWarning: shifting" in result.output  # its line read from the helper's file
    assert 'warnings.warn("shifting")' in result.output


def test_bytecode_shipped_with_a_submission_is_never_run(tmp_path):
    # A __pycache__ file whose code differs from its source would pass the rule unread: the
    # copy drops it, and the worker neither reads nor writes bytecode.
    folder = make_submission(tmp_path / "student", {"softmax.py": SOFTMAX}, base=None)
    cached = importlib.util.cache_from_source(str(folder / "softmax.py"))
    wrong = compile("def softmax(logits, axis=-1):\n    return logits\n",
                    str(folder / "softmax.py"), "exec")
    (folder / "__pycache__").mkdir()
    stat = (folder / "softmax.py").stat()
    header = importlib.util.MAGIC_NUMBER + b"\0\0\0\0" + int(stat.st_mtime).to_bytes(4, "little") \
        + (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    (folder / "__pycache__" / cached.rsplit("/", 1)[1]).write_bytes(header + marshal.dumps(wrong))
    softmax = graded(folder, ["softmax"])["softmax"]
    assert softmax.score == softmax.max_score, softmax.error
