"""Real nbgrader courses for the tests, built once per session (see conftest.py).

``released(base)``: ``nbgrader generate_assignment`` of both assignments, kept untouched as the
template of the two courses below. ``plain_course(base)``: three submissions (the answer key,
the release untouched, two exercises wrong with their locked test cells edited) through plain
``nbgrader autograde`` and ``export``; beside it ``files.json`` (the same wrong code as files,
graded by ``python -m grader grade``) and ``no-key/student.ipynb`` (the release, two exercises
answered, run without the key). ``isolated_course(base)``: the same key and wrong notebooks, a
hostile one, and the odd cases, through ``python -m grader nbgrader autograde``, ``export`` and
``generate_feedback``.

Imported by the tests as a plain module, like ``submission_tools``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

from submission_tools import BONUS, CORE, SOLUTIONS, grader_command

from grader.integrations.routes import kernel, notebook

RELEASE = Path("release/attention/attention.ipynb")
SOURCE = Path("source/attention/attention.ipynb")
BONUS_NOTEBOOK = Path(notebook.BONUS_ASSIGNMENT) / f"{notebook.BONUS_ASSIGNMENT}.ipynb"

# Two classic mistakes, as (exercise, correct text, wrong text): softmax without the max shift
# (overflows on large logits) and a head split that reshapes heads before time.
MISTAKES = [
    ("softmax", "shifted = converted - np.max(converted, axis=axis, keepdims=True)",
     "shifted = converted"),
    ("heads", "x.reshape(b, t, n_head, c // n_head).transpose(0, 2, 1, 3)",
     "x.reshape(b, n_head, t, c // n_head)"),
]
TAMPERED = {name for name, _, _ in MISTAKES}
# Answered in the release a student runs with no answer key anywhere (two cheap exercises).
NO_KEY_ANSWERED = ("softmax", "kv_cache")
DUE, ON_TIME, LATE = ("2030-06-01 12:00:00 UTC", "2030-06-01 11:00:00.000000 UTC",
                      "2030-06-01 14:30:00.000000 UTC")

# What a student who knows how nbgrader runs a notebook tries from an answer cell: read the
# answer key (the source notebook, the kit's solutions/), zero every grade in the gradebook,
# drop a file into its own feedback folder, and forge score() (a test cell that prints nothing
# gets full credit from nbgrader). Each attempt records why it failed instead of stopping.
HOSTILE = '''
def _attempt(action):
    try:
        return action()
    except BaseException as error:
        return f"refused: {{error!r}}"


def _read():
    import json
    found = []
    try:  # the answer key's code, as the source notebook holds it
        for cell in json.load(open("{course}/{source}"))["cells"]:
            text = "".join(cell["source"])
            if "### BEGIN SOLUTION" in text:
                found.append(text.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0])
    except BaseException as error:
        found.append(f"refused: {{error!r}}")
    found.append(_attempt(lambda: open("{key}/softmax.py").read()))
    return "\\n".join(found)


def _vandalize():
    import sqlite3
    db = sqlite3.connect("file:{course}/gradebook.db?mode=rw", uri=True)
    db.execute("UPDATE grade SET manual_score = 0, auto_score = 0")
    db.execute("UPDATE grade_cells SET max_score = 1000")
    db.commit()
    return "vandalized"


def _plant():
    import os
    os.makedirs("{course}/feedback/hostile/attention", exist_ok=True)
    with open("{course}/feedback/hostile/attention/answer-key.txt", "w") as handle:
        handle.write(LEAK)
    return "planted"


LEAK = _read()
ATTEMPTS = [_attempt(_vandalize), _attempt(_plant)]


def score(*args, **kwargs):
    return None
'''


def env(tmp: Path, **extra: str) -> dict[str, str]:
    result = dict(os.environ)
    result["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{result.get('PATH', '')}"
    # nbgrader reads config from the course folder only, not from this machine's Jupyter dirs.
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
        result[name] = str(tmp / "jupyter" / name.lower())
    result["JUPYTER_PLATFORM_DIRS"] = "1"
    result.update(extra)
    return result


def run(args: list[str], cwd: Path, environ: dict[str, str]) -> str:
    done = subprocess.run(args, cwd=cwd, env=environ, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def nbgrader(course: Path, *args: str) -> str:
    return run([sys.executable, "-m", "nbgrader", *args], course, env(course.parent))


def start(args: list[str], cwd: Path, environ: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(args, cwd=cwd, env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(process: subprocess.Popen) -> str:
    output, _ = process.communicate(timeout=900)
    assert process.returncode == 0, f"{process.args} failed:\n{output}"
    return output


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def cells(nb: dict) -> dict[str, dict]:
    return {c["metadata"]["nbgrader"]["grade_id"]: c for c in nb["cells"]
            if c["metadata"].get("nbgrader", {}).get("grade_id")}


def source(cell: dict) -> str:
    return "".join(cell["source"])


def with_answers(release: dict, answers: dict[str, str]) -> dict:
    nb = json.loads(json.dumps(release))
    for grade_id, cell in cells(nb).items():
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    return nb


def wrong(text: str, exercise: str) -> str:
    for name, right, mistaken in MISTAKES:
        if name == exercise:
            assert right in text, f"the mistake for {name} no longer applies to the solution"
            text = text.replace(right, mistaken)
    return text


def key_answers(course: Path, names=CORE, path: Path = SOURCE) -> dict[str, str]:
    source_cells = cells(read(course / path))
    return {n: source(source_cells[n]) for n in names}


def submit(course: Path, student: str, nb: dict | str | None, *,
           assignment: str = "attention", timestamp: str | None = None) -> None:
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True)
    if nb is not None:
        text = nb if isinstance(nb, str) else json.dumps(nb)
        (folder / f"{assignment}.ipynb").write_text(text)
    if timestamp is not None:
        (folder / "timestamp.txt").write_text(timestamp)


@functools.lru_cache
def gradebook(course: Path, student: str) -> dict[str, float]:
    """Points per grade cell, read with nbgrader's own API."""
    script = (
        "import json, sys\n"
        "from nbgrader.api import Gradebook\n"
        "with Gradebook('sqlite:///gradebook.db') as gb:\n"
        "    nb = gb.find_submission_notebook('attention', 'attention', sys.argv[1])\n"
        "    print(json.dumps({g.name: g.score for g in nb.grades}))\n"
    )
    out = run([sys.executable, "-c", script, student], course, env(course.parent))
    return json.loads(out.strip().splitlines()[-1])


# -- the courses ---------------------------------------------------------------------------------
def released(base: Path) -> Path:
    root = base / "released"
    notebook.build(root)
    nbgrader(root, "generate_assignment", "attention")
    nbgrader(root, "generate_assignment", notebook.BONUS_ASSIGNMENT)
    return root


def two_wrong(release: dict, key: dict[str, str]) -> dict:
    """Two exercises wrong, and those exercises' locked test cells overwritten with their
    full points."""
    nb = with_answers(release, {n: wrong(t, n) for n, t in key.items()})
    tests = {f"{n}{kind}" for n in TAMPERED for kind in ("_tests", "_hidden_tests")}
    for grade_id, cell in cells(nb).items():
        if grade_id in tests:
            cell["source"] = [str(cell["metadata"]["nbgrader"]["points"])]
    return nb


def plain_course(base: Path, template: Path) -> Path:
    root = base / "course"
    shutil.copytree(template, root)
    files = base / "files"
    files.mkdir()
    for name in CORE:
        (files / f"{name}.py").write_text(wrong((SOLUTIONS / f"{name}.py").read_text(), name))
    by_files = start([sys.executable, "-m", "grader", "grade", str(files), "--json",
                      str(base / "files.json")], base, env(base))
    release, key = read(root / RELEASE), key_answers(root)
    no_key = base / "no-key"
    (no_key / "solutions").mkdir(parents=True)
    answered = {n: key[n] for n in NO_KEY_ANSWERED}
    (no_key / "student.ipynb").write_text(json.dumps(with_answers(release, answered)))
    without_key = start(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
         "--inplace", f"--ExecutePreprocessor.timeout={kernel.CELL_TIMEOUT}", "student.ipynb"],
        no_key, env(base, **{kernel.KEY_ENV: str(no_key / "solutions")}),
    )
    submit(root, "key", with_answers(release, key))
    submit(root, "untouched", release)
    submit(root, "two_wrong", two_wrong(release, key))
    # The bonus track is its own assignment; the key student answers it with the key.
    bonus_key = key_answers(root, BONUS, Path("source") / BONUS_NOTEBOOK)
    submit(root, "key", with_answers(read(root / "release" / BONUS_NOTEBOOK), bonus_key),
           assignment=notebook.BONUS_ASSIGNMENT)
    nbgrader(root, "autograde", "attention")
    nbgrader(root, "autograde", notebook.BONUS_ASSIGNMENT)
    nbgrader(root, "export", "--to", "grades.csv")
    finish(by_files)
    finish(without_key)
    return root


def hostile(release: dict, key: dict[str, str], course: Path) -> dict:
    """softmax: the key under the attacks; heads: the attacks, then raising what they found
    (the feedback would carry it); the rest untouched, the locked test cells edited."""
    attack = HOSTILE.format(course=course, source=SOURCE, key=SOLUTIONS)
    heads = ("%%exercise heads\n" + attack + "\n\ndef split_heads(x, n_head):\n"
             "    raise RuntimeError(LEAK)\n\n\ndef merge_heads(x):\n"
             "    raise RuntimeError(LEAK)\n")
    softmax = key["softmax"].replace("%%exercise softmax\n", "%%exercise softmax\n" + attack)
    nb = with_answers(release, {"softmax": softmax, "heads": heads})
    for grade_id, cell in cells(nb).items():
        if grade_id.endswith("_tests"):
            cell["source"] = "score = lambda *args, **kwargs: None\n"
    return nb


ATTACKS = Path(__file__).resolve().parent / "attacks"


def attacker(release: dict) -> dict:
    """Two of the red team's attacks as answer cells: a softmax that exits the hidden check's
    worker with its inputs, and a module that calls torch's own attention with every watcher
    switched off (``tests/attacks``)."""
    return with_answers(release, {
        "softmax": "%%exercise softmax\n" + (ATTACKS / "hidden-any-worker" / "softmax.py"
                                                ).read_text(),
        "mha": "%%exercise mha\n" + (ATTACKS / "mha-by-library" / "mha.py").read_text()})


def surrogate(release: dict, key: dict[str, str]) -> dict:
    """The key's answers, with lone surrogates (valid in a notebook's JSON as ``\\ud800``,
    never in a UTF-8 file): in a comment of the softmax cell (Python skips it), and in a string
    of the kv_cache cell (the file cannot be read)."""
    return with_answers(release, {**key, "softmax": key["softmax"] + "\n# \ud800\n",
                                  "kv_cache": key["kv_cache"] + '\n_NOTE = "\ud800"\n'})


def mangled(release: dict, key: dict[str, str]) -> dict:
    """The softmax answer cell deleted; kv_cache's answered twice, the stub first."""
    nb = with_answers(release, {"kv_cache": key["kv_cache"]})
    nb["cells"] = [c for c in nb["cells"]
                   if c["metadata"]["nbgrader"].get("grade_id") != "softmax"]
    index = next(i for i, c in enumerate(nb["cells"])
                 if c["metadata"]["nbgrader"].get("grade_id") == "kv_cache")
    nb["cells"].insert(index, cells(release)["kv_cache"])
    return nb


def add_due_date_and_bystander(course: Path) -> None:
    """A due date for the assignment, and a student who submitted nothing to grade now and
    holds a manual grade that must survive."""
    from nbgrader.api import Gradebook

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy's chatter inside nbgrader's api
        with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
            gb.update_or_create_assignment("attention", duedate=DUE)
            gb.update_or_create_student("bystander")
            gb.update_or_create_submission("attention", "bystander")
            gb.find_grade("softmax_tests", "attention", "attention", "bystander").manual_score = 7
            gb.db.commit()


def isolated_course(base: Path, template: Path) -> tuple[Path, str]:
    """The course after ``python -m grader nbgrader autograde``, export and feedback; and
    what the command printed."""
    root = base / "isolated"
    shutil.copytree(template, root)
    add_due_date_and_bystander(root)
    (base / "structure.json").write_text(json.dumps(structure(root)))
    release, key = read(root / RELEASE), key_answers(root)
    submit(root, "key", with_answers(release, key), timestamp=ON_TIME)
    submit(root, "two_wrong", two_wrong(release, key), timestamp=LATE)
    submit(root, "hostile", hostile(release, key, root))
    submit(root, "mangled", mangled(release, key))
    submit(root, "bare", {"cells": [cells(with_answers(release, key))["kv_cache"]]})
    submit(root, "attacker", attacker(release))
    submit(root, "surrogate", surrogate(release, key))
    submit(root, "missing", None)
    submit(root, "not_json", '{"cells": [')
    # Past the source rule, which would refuse the hostile and attacking cells before they ran:
    # what is tested is what holds outside the student's code.
    printed = run(grader_command(sys.executable, "nbgrader", "autograde", "--course", str(root),
                                 "--jobs", "2", rule=False), base, env(base))
    nbgrader(root, "export", "--to", "grades.csv")
    nbgrader(root, "generate_feedback", "attention")
    return root, printed


STRUCTURE = ("assignment", "notebook", "base_cell", "grade_cells", "solution_cells",
             "source_cell", "task_cells", "course")


def structure(course: Path) -> dict[str, list]:
    """The gradebook's description of the assignments (what generate_assignment wrote)."""
    import sqlite3

    with sqlite3.connect(course / "gradebook.db") as db:
        return {t: sorted(map(list, db.execute(f"SELECT * FROM {t}")), key=repr)
                for t in STRUCTURE}


def key_lines() -> set[str]:
    """Lines of the answer key that the release does not show (inside SOLUTION markers)."""
    from grader.integrations.routes.stubs import BEGIN, END

    lines, inside = set(), False
    for path in sorted(SOLUTIONS.glob("*.py")):
        for line in path.read_text().splitlines():
            if BEGIN.match(line) or END.match(line):
                inside = not inside
            elif inside and len(line.strip()) >= 20:
                lines.add(line.strip())
    return lines

