"""Similar submissions: every pair of students compared exercise by exercise, and every student
against a folder of known outside solutions (``--similarity-corpus DIR``).

The fingerprints are copydetect's (the winnowing of Stanford's MOSS over normalised tokens:
every name becomes V, F or O, every string S, comments and whitespace go, so renaming every
variable or rewording the comments changes nothing), with two choices of ours. The k-grams are
hashed with BLAKE2, not Python's ``hash`` (salted per process: the winnowed fingerprints, so
the scores, would change between runs). The stub's own fingerprints are left out of every file:
the handout's lines are shared by everyone by construction.

A pair's score is the larger of its two files' shares of their own text (stub left out) that is
found in the other file: a copy padded with new code is still flagged through the shorter one.
Pairs scoring the course's ``similarity`` or more are flagged: ``summary.json``'s
``similarity``, a table in ``summary.md``, a section of ``index.html``, and for each pair a
side-by-side page ``similar/N.html`` of the two files with the matching text marked. Every
student's text and name is escaped on those pages.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.course import KIT_ROOT, Course
from ..core.reader import read_regular
from . import inert
from .inert import html as escape  # html.escape, and no control or bidirectional character

STUBS = KIT_ROOT / "exercises"
CORPUS = "corpus"  # the prefix of an outside solution's name in a pair: "corpus/<folder>"
NOISE = 25  # k: normalised characters per fingerprint (copydetect's default noise threshold)
WINDOW = 1  # winnowing window: every k-gram is kept (copydetect's default for these sizes)
MAX_BYTES = 256 << 10  # a file longer than this is compared on its first 256 KiB
MAX_PAGES = 200  # side-by-side pages for the most similar pairs; summary.json lists them all
MAX_LISTED = 200  # rows of the tables in summary.md and index.html


class Unavailable(RuntimeError):
    """copydetect is not installed (it comes with the kit's ``similarity`` extra)."""


def _copydetect() -> Any:
    try:
        import copydetect.utils
        from copydetect import compare_files
    except ImportError as error:
        raise Unavailable("the similarity check needs copydetect: pip install "
                          "'attention-kit[similarity]' (or -r requirements-dev.lock)") from error
    return copydetect.utils, compare_files


@dataclass
class Fingerprint:
    """What copydetect's ``compare_files`` reads of a ``CodeFingerprint``, hashed stably."""

    raw_code: str
    filtered_code: str
    offsets: np.ndarray
    hashes: set[int]
    hash_idx: dict[int, list[int]]
    token_coverage: float
    positions: np.ndarray  # where each fingerprint starts, ascending
    at: np.ndarray  # the fingerprint at each of those positions
    unique: np.ndarray  # the fingerprints, sorted, each once
    k: int = NOISE


def fingerprint(text: str, boilerplate: np.ndarray | None = None) -> Fingerprint:
    """``text``'s winnowed fingerprints, less those in ``boilerplate`` (the stub's)."""
    utils, _ = _copydetect()
    filtered, offsets = utils.filter_code(text, "submission.py", "python")
    grams = [filtered[i:i + NOISE] for i in range(len(filtered) - NOISE + 1)]
    kgrams = np.array([int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(),
                                      "little", signed=True) for g in grams], dtype=np.int64)
    if len(kgrams):
        hashes, idx = utils.winnow(kgrams, WINDOW, remove_duplicates=False)
    else:
        hashes, idx = kgrams, np.array([], dtype=np.int64)
    if boilerplate is not None and len(boilerplate) and len(hashes):
        keep = ~np.isin(hashes, boilerplate)
        hashes, idx = hashes[keep], idx[keep]
    hash_idx: dict[int, list[int]] = {}
    for value, i in zip(hashes.tolist(), idx.tolist()):
        hash_idx.setdefault(value, []).append(i)
    coverage = utils.get_token_coverage(hash_idx, NOISE, len(filtered))
    order = np.argsort(idx, kind="stable")
    return Fingerprint(text, filtered, offsets, set(hash_idx), hash_idx, float(coverage),
                       idx[order], hashes[order], np.unique(hashes))


def shares(a: Fingerprint, b: Fingerprint) -> tuple[float, float]:
    """copydetect's ``compare_files`` similarities, vectorised: for each file, the share of its
    own tokens (those its fingerprints cover) that lie in a k-gram the other file holds too.
    ``compare_files`` builds the marked slices as well, which only a flagged pair's page needs:
    a class of 200 has 20,000 pairs an exercise."""
    return _share(a, b.unique), _share(b, a.unique)


def _share(mine: Fingerprint, theirs: np.ndarray) -> float:
    found = np.searchsorted(theirs, mine.at)
    shared = mine.positions[theirs[np.minimum(found, len(theirs) - 1)] == mine.at]
    if not len(shared):
        return 0.0
    # The copied slices [p, p + k), merged where they overlap (copydetect's get_copied_slices)
    covered = int(np.minimum(np.diff(shared), mine.k).sum()) + mine.k
    return covered / mine.token_coverage


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
class Similarity:
    """The flagged pairs (``summary`` goes into summary.json) and their side-by-side pages."""

    threshold: float
    pairs: list[dict[str, Any]] = field(default_factory=list)
    pages: dict[str, str] = field(default_factory=dict)  # path in the report folder -> HTML

    @property
    def summary(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "pairs": self.pairs}


def compare(submissions: Mapping[str, Path], course: Course, *, corpus: Path | None = None,
            stubs: Path = STUBS) -> Similarity:
    """Compare every pair of ``submissions`` (student -> folder), and every student with every
    outside solution in ``corpus``, exercise by exercise; flag the pairs scoring the course's
    ``similarity`` or more. Deterministic: same files, same result. A file that cannot be
    read or tokenised is left out, and nothing else."""
    _, compare_files = _copydetect()
    outside = corpus_folders(corpus) if corpus is not None else {}
    folders = {**dict(sorted(submissions.items())), **outside}
    found = []
    for order, name in enumerate(course.names()):
        stub = np.array(sorted(fingerprint(read_source(stubs / f"{name}.py") or "").hashes),
                        dtype=np.int64)
        prints: dict[str, Fingerprint] = {}
        seen: dict[str, Fingerprint | None] = {}  # identical files are fingerprinted once
        for who, folder in folders.items():
            text = read_source(Path(folder) / f"{name}.py")
            if text is not None and text not in seen:
                try:
                    seen[text] = fingerprint(text, stub)
                except Exception:  # a file the tokeniser cannot take is not compared
                    seen[text] = None
            mine = seen[text] if text is not None else None
            if mine is not None and mine.token_coverage:  # something of its own beyond the stub
                prints[who] = mine
        ranked = sorted(prints, key=_rank)
        for i, a in enumerate(ranked):
            for b in ranked[i + 1:]:
                if b.startswith(CORPUS) and a.startswith(CORPUS):
                    break  # two outside solutions: not a finding
                if prints[a].hashes.isdisjoint(prints[b].hashes):
                    continue
                score = round(max(shares(prints[a], prints[b])), 3)
                if score >= course.similarity:
                    found.append((-score, order, a, b, name, prints[a], prints[b]))
    result = Similarity(course.similarity)
    for number, (score, _, a, b, name, *both) in enumerate(sorted(found, key=lambda f: f[:4]),
                                                           start=1):
        pair = {"students": [a, b], "exercise": name, "score": -score}
        if number <= MAX_PAGES:
            pair["page"] = f"similar/{number}.html"
            result.pages[pair["page"]] = side_by_side(
                name, -score, (a, both[0]), (b, both[1]), compare_files(*both)[2])
        result.pairs.append(pair)
    return result


def _rank(who: str) -> tuple[bool, str]:
    """Students first, outside solutions second, each by name: a pair reads (student, other)."""
    return who.startswith(CORPUS), who


# -- pages ------------------------------------------------------------------------------------
PAGE_STYLE = """
body { font: 14px/1.4 system-ui, Arial, sans-serif; color: #222; margin: 0 auto; padding: 20px;
       max-width: 1400px; }
.pair { display: flex; gap: 16px; } .pair > div { flex: 1; min-width: 0; }
pre { background: #f7f7f7; padding: 8px; overflow-x: auto; font-size: 13px; }
mark { background: #ffe08a; } .muted { color: #666; }
"""


def side_by_side(exercise: str, score: float, left: tuple[str, Fingerprint],
                 right: tuple[str, Fingerprint], slices: tuple[np.ndarray, np.ndarray]) -> str:
    """One flagged pair: the two files next to each other, the text they share marked."""
    utils, _ = _copydetect()
    columns = []
    for (who, mine), marks in zip((left, right), slices):
        marked, _ = utils.highlight_overlap(mine.raw_code, marks, "<mark>", "</mark>",
                                            escape_html=True)
        # the code as text: a bidirectional control would show it in another order
        columns.append(f"<div><h2>{escape(who)}</h2><pre>{inert.plain(marked)}</pre></div>")
    return "\n".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(exercise)}: {escape(left[0])} and {escape(right[0])}</title>",
        f"<style>{PAGE_STYLE}</style></head><body>",
        f"<h1>{escape(exercise)}.py: {escape(left[0])} and {escape(right[0])}</h1>",
        f'<p class="muted">Similarity {score} (the larger share of either file found in the '
        "other, the stub's own text left out); marked: the text both files share, names "
        'and comments aside. <a href="../index.html">Back to the class report</a></p>',
        '<div class="pair">', *columns, "</div></body></html>"]) + "\n"


# -- in the class report ----------------------------------------------------------------------
def markdown_lines(similarity: dict[str, Any]) -> list[str]:
    """summary.md's section: the flagged pairs, most similar first."""
    lines = ["", "## Similar submissions", "",
             f"Pairs of files with a similarity of {similarity['threshold']} or more "
             "(the stub's text left out)."]
    if not similarity["pairs"]:
        return lines + ["", "None."]
    rows = [[" and ".join(p["students"]), p["exercise"], p["score"], p.get("page", "")]
            for p in similarity["pairs"][:MAX_LISTED]]
    return lines + ["", "| students | exercise | score | side by side |", "|---|---|---|---|",
                    *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows),
                    *_more(similarity["pairs"])]


def _more(pairs: list[dict[str, Any]]) -> list[str]:
    more = len(pairs) - MAX_LISTED
    return ["", f"And {more} more pairs in summary.json."] if more > 0 else []


def _cell(value: Any) -> str:
    return inert.markdown(value)  # the students' names: text, never markup


def html_section(similarity: dict[str, Any]) -> list[str]:
    """index.html's section: each flagged pair linked to its side-by-side page."""
    out = ["<h2>Similar submissions</h2>",
           f'<p class="lead">Pairs of files with a similarity of {similarity["threshold"]} or '
           "more (the stub's text left out), most similar first.</p>"]
    if not similarity["pairs"]:
        return out + ['<p class="muted">No pair of files is that similar.</p>']
    out.append('<table><tr><th>students</th><th>exercise</th><th class="num">score</th>'
               "<th></th></tr>")
    for p in similarity["pairs"][:MAX_LISTED]:
        a, b = (escape(s) for s in p["students"])
        link = (f'<a href="{escape(p["page"])}">side by side</a>' if "page" in p else "")
        out.append(f'<tr><td class="who">{a} and {b}</td><td>{escape(p["exercise"])}</td>'
                   f'<td class="num">{p["score"]}</td><td>{link}</td></tr>')
    out.append("</table>")
    return out + [f'<p class="muted">{escape(line)}</p>' for line in _more(similarity["pairs"])
                  if line]
