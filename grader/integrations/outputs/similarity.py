"""Similar submissions: every pair of students compared exercise by exercise, and every student
against a folder of known outside solutions (``--similarity-corpus DIR``).

Each file is reduced to its own code (``grader.integrations.outputs.fingerprint``: its statements in
one canonical form, less the stub's text, docstrings, signatures and the lines the stub quotes),
so renaming, re-indenting, re-commenting, reordering and splitting into helpers change nothing,
and what the contract makes every author write is never counted. A pair's score is the larger
of its two files' shares of their own code found in the other (a statement held twice counts
twice): a copy padded with new code is still flagged through the shorter one.

Independent authors still write alike where the task leaves little choice, more so in some
exercises than in others, so each exercise is judged against its own class. A pair is flagged
when it scores at or above the exercise's cut: the course's ``similarity`` (the floor), and, in
an exercise with three pairs of students' files or more, the class's median score plus
``SPREAD`` median absolute deviations (at least ``MIN_MAD`` each), 1 at most, and above the
median (where every file is alike, none stands out); and when the two files share at least
``MIN_SHARED`` tokens: a few alike lines are no evidence whoever wrote them.

Identical files are one file held by several students: compared once, listed as one line
(``3 students: softmax.py identical``), and a flagged pair names every holder. A file with no
code of its own (the stub as handed out) is not compared. Matches with outside solutions come
first (a file handed in word for word scores 1). Every flagged pair has a side-by-side page,
``similar/N.html``, its shared statements marked (never the stub's text); nothing is capped.
Every student's text and name is escaped. The same files give the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...core.course import KIT_ROOT, Course
from ...core.reader import read_regular
from . import inert
from .fingerprint import Contract, Fingerprint, contract, fingerprint
from .inert import html as escape  # html.escape, and no control or bidirectional character

STUBS = KIT_ROOT / "exercises"
CORPUS = "corpus"  # the prefix of an outside solution's name in a pair: "corpus/<folder>"
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


def outside(who: str) -> bool:
    return who == CORPUS or who.startswith(CORPUS + "/")


@dataclass
class File:
    """One text of one exercise and who handed it in: students, by name, or else outside
    solutions (an outside solution a student handed in word for word is a pair of them)."""

    holders: list[str]
    print: Fingerprint

    @property
    def students(self) -> list[str]:
        return [h for h in self.holders if not outside(h)]


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

    @property
    def summary(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "pairs": self.pairs, "identical": self.identical,
                "exercises": self.exercises, "min_shared": MIN_SHARED, "spread": SPREAD}


def compare(submissions: Mapping[str, Path], course: Course, *, corpus: Path | None = None,
            stubs: Path = STUBS) -> Similarity:
    """Compare every pair of ``submissions`` (student -> folder), and every student with every
    outside solution in ``corpus``, exercise by exercise, and flag the pairs that stand out
    (the module's docstring). Deterministic: same files, same result. A file that cannot be
    read is left out, and nothing else."""
    holders = {**dict(sorted(submissions.items())),
               **(corpus_folders(corpus) if corpus is not None else {})}
    result = Similarity(course.similarity)
    found: list[tuple[tuple[Any, ...], str, File, File, float, int]] = []
    identical: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for order, name in enumerate(course.names()):
        given = contract(read_source(stubs / f"{name}.py") or "")
        files, empty = _files(name, holders, given)
        identical += [((-len(f.holders), order, f.holders), {
            "exercise": name, "students": f.holders, "tokens": f.print.tokens})
            for f in files if len(f.holders) > 1 and f.students]
        mine = [i for i, f in enumerate(files) if f.students]
        shared, scores = pair_scores([f.print for f in files])
        where = cut(scores[np.ix_(mine, mine)][np.triu_indices(len(mine), 1)],
                    course.similarity)
        flagged = 0
        for i, j in np.argwhere(np.triu((shared >= MIN_SHARED) & (scores >= where.cut), 1)):
            a, b = (files[i], files[j]) if files[i].students else (files[j], files[i])
            if not a.students or not where.flags(scores[i, j]):
                continue  # two outside solutions, or a pair that does not stand out
            flagged += 1
            first = (bool(b.students), -scores[i, j], order, a.holders[0], b.holders[0])
            found.append((first, name, a, b, float(scores[i, j]), int(shared[i, j])))
        result.exercises[name] = {"files": len(mine), "pairs": where.pairs,
                                  "median": where.median, "mad": where.mad, "cut": where.cut,
                                  "flagged": flagged, "no_code": empty}
    result.identical = [entry for _, entry in sorted(identical, key=lambda g: g[0])]
    for number, (_, name, a, b, score, common) in enumerate(sorted(found, key=lambda f: f[0]),
                                                           start=1):
        page = f"similar/{number}.html"
        result.pairs.append({
            "students": [a.holders[0], b.holders[0]], "exercise": name, "score": score,
            "page": page, "shared": common,
            "shares": [round(common / max(a.print.tokens, 1), 3),
                       round(common / max(b.print.tokens, 1), 3)],
            "groups": [a.holders, b.holders]})
        result.pages[page] = side_by_side(result.pairs[-1], a, b, result.exercises[name],
                                          course.similarity)
    return result


def _files(name: str, holders: Mapping[str, Path], given: Contract) -> tuple[list[File], int]:
    """The distinct texts of ``name``'s files with code of their own, and how many students
    handed in none (the stub as given, or a file holding nothing beyond it)."""
    texts: dict[tuple[bool, str], list[str]] = {}  # students' and outside files apart
    for who, folder in holders.items():
        text = read_source(Path(folder) / f"{name}.py")
        if text is not None:
            texts.setdefault((outside(who), text), []).append(who)
    prints: dict[str, Fingerprint] = {}
    files, empty = [], 0
    for (corpus, text), who in texts.items():
        if text not in prints:
            try:
                prints[text] = fingerprint(text, given)
            except Exception:  # never seen: a file the reader cannot take is left out
                continue
        mine = prints[text]
        if mine.tokens:
            files.append(File(sorted(who), mine))
        elif not corpus:
            empty += len(who)
    files.sort(key=lambda f: (not f.students, f.holders))
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


def side_by_side(pair: dict[str, Any], left: File, right: File, exercise: dict[str, Any],
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
        f"{escape(_why(exercise, floor))}</p>",
        '<p class="muted">Marked: the statements both files hold, names, comments, layout and '
        "order aside. Unmarked: each file's own, and what the exercise gives everyone (the "
        'stub\'s text, docstrings, signatures, imports). <a href="../index.html">Back to the '
        "class report</a></p>",
        '<div class="pair">', *columns, "</div></body></html>"]) + "\n"


def _why(exercise: dict[str, Any], floor: float) -> str:
    """The sentence that says where an exercise's cut came from."""
    if exercise["pairs"] < MIN_PAIRS:
        return (f"Flagged from {exercise['cut']} (the course's floor: too few files in this "
                "exercise to compare with the class).")
    if exercise["cut"] > floor:
        return (f"Flagged from {exercise['cut']}: the class's median {exercise['median']} plus "
                f"{SPREAD:g} times its median deviation {max(exercise['mad'], MIN_MAD)}, above "
                f"the course's floor {floor}.")
    return (f"Flagged from {exercise['cut']}: the course's floor, above the class's median "
            f"{exercise['median']} plus {SPREAD:g} times its median deviation "
            f"{max(exercise['mad'], MIN_MAD)}.")


# -- in the class report ----------------------------------------------------------------------
def _rule(similarity: dict[str, Any]) -> str:
    return (f"Each exercise's files are compared statement by statement, names, comments, "
            "layout and order aside, and what the exercise gives everyone (the stub's text, "
            "docstrings, signatures, imports, the lines its docstrings quote) left out. A pair "
            "is flagged when the larger share of either file's own code found in the other "
            f"reaches the exercise's cut (the course's floor {similarity['threshold']}, or the "
            f"class's median plus {similarity.get('spread', SPREAD):g} median deviations where "
            f"higher) and the two share {similarity.get('min_shared', MIN_SHARED)} tokens or "
            "more (about five lines). Outside solutions first.")


def _group(students: list[str]) -> str:
    return students[0] + (f" (+{len(students) - 1} with the same file)"
                          if len(students) > 1 else "")


def _identical_line(group: dict[str, Any]) -> str:
    who = group["students"]
    return (f"{len(who)} students: {group['exercise']}.py identical ({group['tokens']} tokens "
            f"of their own): {', '.join(who)}")


def _cut_rows(similarity: dict[str, Any]) -> list[list[Any]]:
    """Each exercise with two students' files or more, or one with no code of its own: its
    files, its class's scores, its cut."""
    return [[name, e["files"], e["median"], e["mad"], e["cut"], e["flagged"], e["no_code"]]
            for name, e in similarity.get("exercises", {}).items()
            if e["files"] > 1 or e["no_code"]]


CUT_HEADER = ["exercise", "distinct files", "median", "deviation", "cut", "flagged",
              "no code of their own"]


def _alike(similarity: dict[str, Any]) -> list[str]:
    """The sentence naming the exercises where no pair can stand out, if any."""
    names = [name for name, e in similarity.get("exercises", {}).items()
             if e["pairs"] >= MIN_PAIRS and e["median"] >= e["cut"]]
    if not names:
        return []
    return [f"In {', '.join(names)}, half the pairs of files or more are as alike as a flagged "
            "pair would be: those files are one code (copied, or all the exercise allows), "
            "and no pair stands out."]


def markdown_lines(similarity: dict[str, Any]) -> list[str]:
    """summary.md's section: the flagged pairs (outside solutions first), the identical files,
    each exercise's cut."""
    lines = ["", "## Similar submissions", "", _cell(_rule(similarity))]
    pairs = similarity["pairs"]
    if pairs:
        lines += ["", "| students | exercise | score | in common | side by side |",
                  "|---|---|---|---|---|"]
        for p in pairs:
            left, right = p.get("groups", [[s] for s in p["students"]])
            row = [f"{_group(left)} and {_group(right)}", p["exercise"], p["score"],
                   p.get("shared", ""), p.get("page", "")]
            lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    else:
        lines += ["", "No pair of files stands out."]
    if similarity.get("identical"):
        lines += ["", "Identical files:", ""]
        lines += [f"- {_cell(_identical_line(g))}" for g in similarity["identical"]]
    rows = _cut_rows(similarity)
    if rows:
        lines += ["", "| " + " | ".join(CUT_HEADER) + " |",
                  "|" + "---|" * len(CUT_HEADER)]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines + [line for sentence in _alike(similarity) for line in ("", sentence)]


def _cell(value: Any) -> str:
    return inert.markdown(value)  # the students' names: text, never markup


def html_section(similarity: dict[str, Any]) -> list[str]:
    """index.html's section: each flagged pair linked to its side-by-side page, outside
    solutions first; the identical files; each exercise's cut."""
    out = ["<h2>Similar submissions</h2>", f'<p class="lead">{escape(_rule(similarity))}</p>']
    pairs = similarity["pairs"]
    if pairs:
        out.append('<table><tr><th>students</th><th>exercise</th><th class="num">score</th>'
                   '<th class="num">tokens in common</th><th></th></tr>')
        for p in pairs:
            left, right = p.get("groups", [[s] for s in p["students"]])
            link = f'<a href="{escape(p["page"])}">side by side</a>' if "page" in p else ""
            out.append(f'<tr><td class="who">{escape(_group(left))} and '
                       f'{escape(_group(right))}</td><td>{escape(p["exercise"])}</td>'
                       f'<td class="num">{p["score"]}</td>'
                       f'<td class="num">{p.get("shared", "")}</td><td>{link}</td></tr>')
        out.append("</table>")
    else:
        out.append('<p class="muted">No pair of files stands out.</p>')
    if similarity.get("identical"):
        out += ["<h3>Identical files</h3>", "<ul>"]
        out += [f"<li>{escape(_identical_line(g))}</li>" for g in similarity["identical"]]
        out.append("</ul>")
    rows = _cut_rows(similarity)
    if rows:
        out += ["<h3>Each exercise's cut</h3>", "<table><tr>"
                + "".join(f"<th>{h}</th>" for h in CUT_HEADER) + "</tr>"]
        out += ["<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>"
                for row in rows]
        out.append("</table>")
    return out + [f"<p>{escape(sentence)}</p>" for sentence in _alike(similarity)]
