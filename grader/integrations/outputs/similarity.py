"""Similar submissions: every pair of students compared exercise by exercise, and every student
against known outside solutions: a folder of them (``--similarity-corpus DIR``), or else the
answer key (``solutions/``, where the kit has it).

Each file is reduced to its own code (``grader.integrations.outputs.fingerprint``: its statements in
one canonical form, less the stub's text, docstrings, signatures and the lines the stub quotes),
so renaming, re-indenting, re-commenting, reordering and splitting into helpers change nothing,
and what the contract makes every author write is never counted. A pair's score is the larger
of its two files' shares of their own code found in the other (a statement held twice counts
twice): a copy padded with new code is still flagged through the shorter one.

Independent authors still write alike where the task leaves little choice, more so in some
exercises than in others, so each exercise is judged against its own class. A pair of students
is flagged when it scores at or above the exercise's cut: the course's ``similarity`` (the
floor), and, in an exercise with three pairs of students' files or more, the class's median
score plus ``SPREAD`` median absolute deviations (at least ``MIN_MAD`` each), 1 at most, and
above the median (where every file is alike, none stands out). A student and an outside file
are judged the same way against the class's own scores with that outside file: one that most of
the class is as close to (``split_heads`` as anyone writes it, against the key's) flags no one,
and a student far above the rest is flagged. Either way the two files must share at least
``MIN_SHARED`` tokens: a few alike lines are no evidence whoever wrote them.

Identical files are one file held by several students: compared once, listed as one line
(``3 students: softmax.py identical``), and a flagged pair names every holder. A file with no
code of its own (the stub as handed out) is not compared. Matches with outside solutions come
first (a file handed in word for word scores 1). Every flagged pair has a side-by-side page,
``similar/N.html``, its shared statements marked (never the stub's text); nothing is capped.
Every student's text and name is escaped. The same files give the same bytes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...core.course import KIT_ROOT, Course
from ...core.reader import read_regular
from .fingerprint import Contract, Fingerprint, contract, fingerprint
from .inert import html as escape  # html.escape, and no control or bidirectional character

STUBS = KIT_ROOT / "exercises"
CORPUS = "corpus"  # the prefix of an outside solution's name in a pair: "corpus/<folder>"
KEY = "answer key"  # the answer key's name in a pair, where it is the outside solution
KEY_FOLDER = "solutions/"  # where the kit keeps it, as the report names it
MAX_BYTES = 256 << 10  # a file longer than this is compared on its first 256 KiB
MIN_SHARED = 50  # tokens two files must share (about five lines) to be flagged
SPREAD = 3.0  # how many median absolute deviations above the median a flagged pair stands
MIN_MAD = 0.05  # the smallest deviation the cut assumes (a class of near-identical scores)
MIN_PAIRS = 3  # fewer pairs of students' files than this: no distribution, the floor alone


def read_source(path: Path) -> str | None:
    """The text of a regular file (no link, no device, no pipe, no second name of another's
    file: ``grader.core.reader.read_regular``), its first MAX_BYTES."""
    try:
        raw = read_regular(path, MAX_BYTES)
    except OSError:
        return None
    return None if raw is None else raw[:MAX_BYTES].decode("utf-8", errors="replace")


def corpus_folders(corpus: Path) -> dict[str, Path]:
    """The outside solutions under ``corpus``, by name: ``corpus`` itself when it holds
    exercise files, and each folder below it that does (``corpus/<relative folder>``)."""
    found = {}
    for folder in sorted([corpus, *(p for p in corpus.rglob("*") if p.is_dir())]):
        if any(p.suffix == ".py" and p.is_file() for p in folder.iterdir()):
            relative = folder.relative_to(corpus).as_posix()
            found[CORPUS if relative == "." else f"{CORPUS}/{relative}"] = folder
    return found


@dataclass
class File:
    """One text of one exercise and who handed it in: students, by name, or else outside
    solutions (an outside solution a student handed in word for word is a pair of them)."""

    holders: list[str]
    print: Fingerprint
    outside: bool = False

    @property
    def students(self) -> list[str]:
        return [] if self.outside else self.holders


@dataclass(frozen=True)
class Cut:
    """Where an exercise's pairs are flagged: ``cut``, from the floor and the class's scores."""

    pairs: int  # pairs of students' files compared
    median: float
    mad: float
    cut: float

    def flags(self, score: float) -> bool:
        """Whether a pair scoring ``score`` stands out: at the cut or above, and above the
        class's median (a class whose files are all alike has no pair that stands out)."""
        return score >= self.cut and (self.pairs < MIN_PAIRS or score > self.median)


def cut(scores: np.ndarray, floor: float) -> Cut:
    """The cut of an exercise whose pairs of students' files scored ``scores``: ``floor``, or
    the median plus ``SPREAD`` deviations where that is higher and there are ``MIN_PAIRS``
    pairs or more to take them from; 1 at most (the score of a file whose own code the other
    holds whole)."""
    if len(scores) < MIN_PAIRS:
        return Cut(len(scores), 0.0, 0.0, floor)
    median = float(np.median(scores))
    mad = float(np.median(np.abs(scores - median)))
    raised = median + SPREAD * max(mad, MIN_MAD)
    return Cut(len(scores), round(median, 3), round(mad, 3),
               round(min(max(floor, raised), 1.0), 3))


@dataclass
class Similarity:
    """The flagged pairs, the identical files, each exercise's cut (``summary`` goes into
    summary.json) and the pairs' side-by-side pages."""

    threshold: float
    pairs: list[dict[str, Any]] = field(default_factory=list)
    identical: list[dict[str, Any]] = field(default_factory=list)
    exercises: dict[str, dict[str, Any]] = field(default_factory=dict)
    pages: dict[str, str] = field(default_factory=dict)  # path in the report folder -> HTML
    outside: str = ""  # what the students were compared with besides each other: "corpus", "key"

    @property
    def summary(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "pairs": self.pairs, "identical": self.identical,
                "exercises": self.exercises, "min_shared": MIN_SHARED, "spread": SPREAD,
                **({"outside": self.outside} if self.outside else {})}


def compare(submissions: Mapping[str, Path], course: Course, *, corpus: Path | None = None,
            key: Path | None = None, stubs: Path = STUBS) -> Similarity:
    """Compare every pair of ``submissions`` (student -> folder), and every student with every
    outside solution (those in ``corpus``; without one, the answer key's files in ``key``),
    exercise by exercise, and flag the pairs that stand out (the module's docstring).
    Deterministic: same files, same result. A file that cannot be read is left out, and
    nothing else."""
    students = dict(sorted(submissions.items()))
    outsiders = corpus_folders(corpus) if corpus is not None else (
        {KEY: key} if key is not None else {})
    result = Similarity(course.similarity, outside="corpus" if corpus is not None else
                        "key" if key is not None else "")
    found: list[tuple[tuple[Any, ...], str, File, File, float, int, dict[str, Any]]] = []
    identical: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for order, name in enumerate(course.names()):
        given = contract(read_source(stubs / f"{name}.py") or "")
        files, empty = _files(name, students, outsiders, given)
        identical += [((-len(f.holders), order, f.holders), {
            "exercise": name, "students": f.holders, "tokens": f.print.tokens})
            for f in files if len(f.holders) > 1 and f.students]
        mine = [i for i, f in enumerate(files) if f.students]
        shared, scores = pair_scores([f.print for f in files])
        where = cut(scores[np.ix_(mine, mine)][np.triu_indices(len(mine), 1)],
                    course.similarity)
        # each outside file against the class's own scores with it
        rules = {j: cut(scores[mine, j], course.similarity)
                 for j, f in enumerate(files) if f.outside}
        candidates = np.argwhere(np.triu((shared >= MIN_SHARED) & (scores >= course.similarity),
                                         1))
        # a student's file (sorted first) with an outside one, then two students' files
        matches = [(i, j, rules[j]) for i, j in candidates
                   if not files[i].outside and files[j].outside and rules[j].flags(scores[i, j])]
        copied: dict[int, list[int]] = {}  # a student's file -> the outside files it copies
        for i, j, _ in matches:
            copied.setdefault(i, []).append(j)
        explained = 0
        for i, j in candidates:
            if files[j].outside or not where.flags(scores[i, j]):
                continue  # an outside file (above), or a pair that does not stand out
            if _explained(i, j, copied, scores):
                explained += 1
                continue
            matches.append((i, j, where))
        for i, j, rule in matches:
            a, b = files[i], files[j]
            first = (not b.outside, -scores[i, j], order, a.holders[0], b.holders[0])
            found.append((first, name, a, b, float(scores[i, j]), int(shared[i, j]),
                          _rule(rule, outside=b.outside)))
        flagged = Counter(j if files[j].outside else None for _, j, _ in matches)
        result.exercises[name] = {"files": len(mine), **_rule(where), "flagged": flagged[None],
                                  "no_code": empty}
        if explained:
            result.exercises[name]["explained"] = explained
        if rules:
            result.exercises[name]["outside"] = [
                {**_rule(rule), "source": files[j].holders, "flagged": flagged[j]}
                for j, rule in rules.items()]
    result.identical = [entry for _, entry in sorted(identical, key=lambda g: g[0])]
    for number, (_, name, a, b, score, common, rule) in enumerate(
            sorted(found, key=lambda f: f[0]), start=1):
        page = f"similar/{number}.html"
        result.pairs.append({
            "students": [a.holders[0], b.holders[0]], "exercise": name, "score": score,
            "page": page, "shared": common, "cut": rule["cut"],
            "shares": [round(common / max(a.print.tokens, 1), 3),
                       round(common / max(b.print.tokens, 1), 3)],
            "groups": [a.holders, b.holders]})
        result.pages[page] = side_by_side(result.pairs[-1], a, b, rule, course.similarity)
    return result


def _explained(i: int, j: int, copied: Mapping[int, list[int]], scores: np.ndarray) -> bool:
    """Whether two students' files ``i`` and ``j`` are alike only as one of them copies an
    outside file that the other is as close to: an honest file that writes heads as the key
    does is as alike to a copy of the key; the copy is flagged with the key, not with it."""
    return (any(scores[i, j] <= scores[i, k] for k in copied.get(j, ()))
            or any(scores[i, j] <= scores[j, k] for k in copied.get(i, ())))


def _rule(where: Cut, *, outside: bool | None = None) -> dict[str, Any]:
    """A cut as summary.json keeps it (``outside``: also whether it is an outside file's)."""
    rule = {"pairs": where.pairs, "median": where.median, "mad": where.mad, "cut": where.cut}
    return rule if outside is None else {**rule, "outside": outside}


def _files(name: str, students: Mapping[str, Path], outsiders: Mapping[str, Path],
           given: Contract) -> tuple[list[File], int]:
    """The distinct texts of ``name``'s files with code of their own, the students' first,
    and how many students handed in none (the stub as given, or a file holding nothing beyond
    it). A student's file and an outside one are two files, whatever their texts."""
    texts: dict[tuple[bool, str], list[str]] = {}  # students' and outside files apart
    for outside, holders in ((False, students), (True, outsiders)):
        for who, folder in holders.items():
            text = read_source(Path(folder) / f"{name}.py")
            if text is not None:
                texts.setdefault((outside, text), []).append(who)
    prints: dict[str, Fingerprint] = {}
    files, empty = [], 0
    for (outside, text), who in texts.items():
        if text not in prints:
            try:
                prints[text] = fingerprint(text, given)
            except Exception:  # never seen: a file the reader cannot take is left out
                continue
        mine = prints[text]
        if mine.tokens:
            files.append(File(sorted(who), mine, outside))
        elif not outside:
            empty += len(who)
    files.sort(key=lambda f: (f.outside, f.holders))
    return files, empty


def pair_scores(prints: list[Fingerprint]) -> tuple[np.ndarray, np.ndarray]:
    """For every pair of files: the tokens of their own code in common, and the score (the
    larger of the two files' shares of their own code found in the other, to 3 decimals)."""
    shared = _shared(prints)
    tokens = np.array([max(p.tokens, 1) for p in prints], dtype=np.float64)
    return shared, np.round(np.maximum(shared / tokens[:, None], shared / tokens[None, :]), 3)


def _shared(prints: list[Fingerprint]) -> np.ndarray:
    """Tokens in common for every pair of files: the weights of the statements both hold (a
    statement held twice by each counts twice). One block addition per set of files that
    hold some statements together: a class of 200 is 200 x 200 numbers an exercise."""
    holders: dict[tuple[str, int], list[int]] = {}
    weights: dict[str, int] = {}
    for index, p in enumerate(prints):
        for item, s in zip(p.items, p.statements):
            holders.setdefault(item, []).append(index)
            weights[s.key] = s.weight
    together: dict[tuple[int, ...], int] = {}  # the statements held by the same files, summed
    for (key, _), who in holders.items():
        if len(who) > 1:
            together[tuple(who)] = together.get(tuple(who), 0) + weights[key]
    shared = np.zeros((len(prints), len(prints)), dtype=np.int64)
    for who, weight in together.items():
        shared[np.ix_(who, who)] += weight
    np.fill_diagonal(shared, 0)
    return shared


# -- pages ------------------------------------------------------------------------------------
PAGE_STYLE = """
body { font: 14px/1.4 system-ui, Arial, sans-serif; color: #222; margin: 0 auto; padding: 20px;
       max-width: 1400px; }
.pair { display: flex; gap: 16px; } .pair > div { flex: 1; min-width: 0; }
pre { background: #f7f7f7; padding: 8px; overflow-x: auto; font-size: 13px; }
mark { background: #ffe08a; } .muted { color: #666; }
"""


def marked(mine: Fingerprint, theirs: Fingerprint) -> str:
    """``mine``'s text, escaped, its statements that ``theirs`` holds too marked."""
    common = set(theirs.items)
    spans = sorted(span for item, s in zip(mine.items, mine.statements) if item in common
                   for span in s.spans)
    out, at = [], 0
    for start, end in spans:
        if start < at:
            continue
        out += [escape(mine.text[at:start]), "<mark>", escape(mine.text[start:end]), "</mark>"]
        at = end
    return "".join(out + [escape(mine.text[at:])])


def side_by_side(pair: dict[str, Any], left: File, right: File, rule: dict[str, Any],
                 floor: float) -> str:
    """One flagged pair: the two files next to each other, the statements they share marked."""
    name, score = pair["exercise"], pair["score"]
    a, b = pair["students"]
    columns = []
    for (mine, theirs), share in zip(((left, right), (right, left)), pair["shares"]):
        also = mine.holders[1:]
        held = (f'<p class="muted">The same file: {escape(", ".join(also))}</p>'
                if also else "")
        columns.append(f"<div><h2>{escape(mine.holders[0])}</h2><p>{share:.0%} of this "
                       f"file's own code is in the other.</p>{held}"
                       f"<pre>{marked(mine.print, theirs.print)}</pre></div>")
    return "\n".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(name)}: {escape(a)} and {escape(b)}</title>",
        f"<style>{PAGE_STYLE}</style></head><body>",
        f"<h1>{escape(name)}.py: {escape(a)} and {escape(b)}</h1>",
        f"<p>Similarity {score}: {pair['shared']} tokens of their own code in common. "
        f"{escape(_why(rule, floor))}</p>",
        '<p class="muted">Marked: the statements both files hold, names, comments, layout and '
        "order aside. Unmarked: each file's own, and what the exercise gives everyone (the "
        'stub\'s text, docstrings, signatures, imports). <a href="../index.html">Back to the '
        "class report</a></p>",
        '<div class="pair">', *columns, "</div></body></html>"]) + "\n"


def _why(rule: dict[str, Any], floor: float) -> str:
    """The sentence that says where a pair's cut came from: the class's scores with each
    other, or with the outside file of the pair."""
    median = "the class's median" + (" score with this outside file" if rule.get("outside")
                                      else "")
    if rule["pairs"] < MIN_PAIRS:
        return (f"Flagged from {rule['cut']} (the course's floor: too few files in this "
                "exercise to compare with the class).")
    if rule["cut"] > floor:
        return (f"Flagged from {rule['cut']}: {median} {rule['median']} plus {SPREAD:g} times "
                f"its median deviation {max(rule['mad'], MIN_MAD)}, above the course's floor "
                f"{floor}.")
    return (f"Flagged from {rule['cut']}: the course's floor, above {median} {rule['median']} "
            f"plus {SPREAD:g} times its median deviation {max(rule['mad'], MIN_MAD)}.")
