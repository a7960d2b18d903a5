"""The class report's section on similar submissions (``similarity.compare``'s summary):
the flagged pairs, outside solutions first, each linked to its side-by-side page; the identical
files; each exercise's cut, and each outside file's where the class's scores raised it.
Rendered from summary.json's ``similarity`` alone, in Markdown (summary.md) and HTML
(index.html); every student's name is escaped."""

from __future__ import annotations

from typing import Any

from . import inert
from .inert import html as escape  # html.escape, and no control or bidirectional character
from .similarity import KEY, KEY_FOLDER, MIN_PAIRS, MIN_SHARED, SPREAD


def _rule(similarity: dict[str, Any]) -> str:
    return (f"Each exercise's files are compared statement by statement, names, comments, "
            "layout and order aside, and what the exercise gives everyone (the stub's text, "
            "docstrings, signatures, imports, the lines its docstrings quote) left out. A pair "
            "is flagged when the larger share of either file's own code found in the other "
            f"reaches the exercise's cut (the course's floor {similarity['threshold']}, or the "
            f"class's median plus {similarity.get('spread', SPREAD):g} median deviations where "
            f"higher) and the two share {similarity.get('min_shared', MIN_SHARED)} tokens or "
            "more (about five lines). Outside solutions first." + _outside(similarity))


def _outside(similarity: dict[str, Any]) -> str:
    """What the students were compared with besides each other, and how it was judged."""
    compared = {"key": f" Every student was also compared with the answer key in {KEY_FOLDER} "
                       "(no --similarity-corpus was given; a pair with it is named "
                       f"'{KEY}').",
                "corpus": " Every student was also compared with the outside solutions of "
                          "--similarity-corpus."}.get(similarity.get("outside", ""))
    if compared is None:
        return ""
    return compared + (" A match with an outside file is judged against the class's own "
                       "scores with that file in the same way: a file most of the class is "
                       "as close to flags no one. Two students alike only as one of them "
                       "copies an outside file that the other is as close to are listed as "
                       "that copy alone.")


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


def _outside_rows(similarity: dict[str, Any]) -> list[list[Any]]:
    """Each outside file whose cut the class's scores with it raised above the floor, or with
    a flagged student: the class is closer to it than to a stranger, or someone copied it."""
    return [[name, ", ".join(o["source"]), o["pairs"],
             *((o["median"], o["mad"]) if o["pairs"] >= MIN_PAIRS else ("-", "-")), o["cut"],
             o["flagged"]]
            for name, e in similarity.get("exercises", {}).items()
            for o in e.get("outside", [])
            if o["flagged"] or o["cut"] > similarity["threshold"]]


OUTSIDE_HEADER = ["exercise", "outside file", "students' files", "median", "deviation", "cut",
                  "flagged"]


def _alike(similarity: dict[str, Any]) -> list[str]:
    """The sentences naming the exercises where no pair can stand out, if any, and the
    outside files half the class is as close to as a flagged file would be."""
    exercises = similarity.get("exercises", {})
    names = [name for name, e in exercises.items()
             if e["pairs"] >= MIN_PAIRS and e["median"] >= e["cut"]]
    close = [f"{name}'s {' = '.join(o['source'])}" for name, e in exercises.items()
             for o in e.get("outside", []) if o["pairs"] >= MIN_PAIRS and o["median"] >= o["cut"]]
    found = []
    if names:
        found.append(f"In {', '.join(names)}, half the pairs of files or more are as alike as a "
                     "flagged pair would be: those files are one code (copied, or all the "
                     "exercise allows), and no pair stands out.")
    if close:
        found.append(f"Half the students' files or more are as close to {', '.join(close)} as "
                     "a flagged file would be: they are one code with it (copied, or all the "
                     "exercise allows), and none of them stands out.")
    return found


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
    outside = _outside_rows(similarity)
    if outside:
        lines += ["", "Outside files judged against the class's scores with them:", "",
                  "| " + " | ".join(OUTSIDE_HEADER) + " |", "|" + "---|" * len(OUTSIDE_HEADER)]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in outside]
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
    outside = _outside_rows(similarity)
    if outside:
        out += ["<h3>Outside files judged against the class's scores with them</h3>",
                "<table><tr>" + "".join(f"<th>{h}</th>" for h in OUTSIDE_HEADER) + "</tr>"]
        out += ["<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>"
                for row in outside]
        out.append("</table>")
    return out + [f"<p>{escape(sentence)}</p>" for sentence in _alike(similarity)]
