"""``index.html``: the class summary as one self-contained page, plots drawn as inline SVG.

No script, no font, no image, no stylesheet from anywhere: the page reads the same from a
file:// URL, an email attachment or a browser without network. The plots are written here by
hand (bars are rects, positions rounded to 0.1 px), so the same summary gives the same bytes.
Every name that came from a submission (folder names, statuses) is escaped (``inert.html``).
"""

from __future__ import annotations

from typing import Any

from ...core.plural import counted
from .inert import html as escape  # html.escape, and no control or bidirectional character
from .similarity_report import html_section

BLUE, GREEN, RED, AMBER, GREY, INK = "#3b6ea5", "#2e8b57", "#c0504d", "#d9962b", "#9aa5b1", "#222"
CHECKS_SHOWN = 12  # the lowest pass rates the page and the tables show
STATUS_COLOURS = {"graded": GREEN, "timeout": AMBER, "crashed": RED, "empty": GREY}

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif;
       color: #222; margin: 0 auto; max-width: 1040px; padding: 24px; background: #fff; }
h1 { font-size: 26px; margin: 0 0 4px; } h2 { font-size: 20px; margin: 32px 0 8px;
     border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 18px 0 4px; } .lead { color: #555; margin: 0 0 8px; }
.grid { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; } figcaption { font-size: 13px; color: #555; }
svg { display: block; } svg text { font-family: system-ui, Arial, sans-serif; }
table { border-collapse: collapse; font-size: 14px; margin: 6px 0; }
td, th { border-bottom: 1px solid #e4e4e4; padding: 3px 10px 3px 0; text-align: left;
         vertical-align: top; }
.num { text-align: right; } .who { white-space: nowrap; } .muted { color: #666; }
.hint { margin: 2px 0 6px; }
.names { columns: 3 220px; font-size: 13px; margin: 4px 0; padding-left: 18px; }
code { background: #f3f3f3; padding: 0 3px; border-radius: 3px; }
"""


def lowest_checks(summary: dict[str, Any], count: int = CHECKS_SHOWN) -> list[tuple[str, Any]]:
    """The checks with the lowest pass rates (ties: the course's order), failing ones only."""
    order = list(summary["checks"])
    failing = [(n, c) for n, c in summary["checks"].items() if c["passed"] < c["students"]]
    return sorted(failing, key=lambda nc: (nc[1]["pass_rate"], order.index(nc[0])))[:count]


def _n(value: float) -> str:
    """A coordinate: at most one decimal, no trailing zeros (stable bytes)."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _svg(width: float, height: float, label: str, body: list[str], kind: str) -> str:
    return (f'<svg class="plot {kind}" width="{_n(width)}" height="{_n(height)}" '
            f'viewBox="0 0 {_n(width)} {_n(height)}" role="img" aria-label="{escape(label)}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(label)}</title>'
            + "".join(body) + "</svg>")


def _rect(x: float, y: float, w: float, h: float, fill: str, title: str) -> str:
    return (f'<rect class="bar" x="{_n(x)}" y="{_n(y)}" width="{_n(max(w, 0))}" '
            f'height="{_n(max(h, 0))}" fill="{fill}"><title>{escape(title)}</title></rect>')


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 12,
          colour: str = INK) -> str:
    return (f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{colour}">{escape(text)}</text>')


def _line(x1: float, y1: float, x2: float, y2: float, colour: str = "#bbb") -> str:
    return (f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" '
            f'stroke="{colour}" stroke-width="1"/>')


def histogram_svg(name: str, stats: dict[str, Any], width: float = 320,
                  height: float = 150) -> str:
    """Bars per score bin; the full-marks bin in green. Axis: the bins' lower edges."""
    bins = stats["histogram"]
    left, right, top, bottom = 30.0, 8.0, 16.0, 24.0
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max([b["count"] for b in bins] + [1])
    step = plot_w / len(bins)
    body = [_line(left, top + plot_h, width - right, top + plot_h, "#888"),
            _text(left - 4, top + 4, str(peak), anchor="end", size=10),
            _text(left - 4, top + plot_h, "0", anchor="end", size=10)]
    tick = 5 * (bins[1]["low"] - bins[0]["low"]) if len(bins) > 1 else 1
    for i, b in enumerate(bins):
        full = b["low"] == b["high"]
        span = f"{b['low']}" if full else f"{b['low']} to under {b['high']}"
        h = plot_h * b["count"] / peak
        x = left + i * step
        body.append(_rect(x + 1, top + plot_h - h, step - 2, h, GREEN if full else BLUE,
                          f"{name}: {counted(b['count'], 'student')} scored {span}"))
        if b["count"] and step >= 18:  # room for the count above the bar
            body.append(_text(x + step / 2, top + plot_h - h - 3, str(b["count"]),
                              anchor="middle", size=10))
        if full or b["low"] % tick == 0:
            body.append(_text(x + step / 2, height - 8, str(b["low"]), anchor="middle",
                              size=10))
    return _svg(width, height, f"{name}: score distribution", body, "histogram")


def _hbars(rows: list[tuple[str, float, str, str, str]], label_w: float, width: float,
           label: str, kind: str) -> str:
    """Horizontal bars: (label, fraction of the bar area, text after the bar, colour, title)."""
    row_h, top = 26.0, 4.0
    bar_w = width - label_w - 90
    height = top * 2 + row_h * len(rows)
    body = []
    for i, (name, fraction, after, colour, title) in enumerate(rows):
        y = top + i * row_h
        body.append(_text(label_w - 8, y + 17, name, anchor="end", size=12))
        w = bar_w * min(max(fraction, 0), 1)
        body.append(_rect(label_w, y + 4, max(w, 2), row_h - 8, colour, title))
        body.append(_text(label_w + max(w, 2) + 6, y + 17, after, size=12))
    return _svg(width, height, label, body, kind)


def _short(text: str, limit: int = 46) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def misconceptions_svg(summary: dict[str, Any], width: float = 1000) -> str:
    items = list(summary["misconceptions"].items())
    graded = max(summary["class"]["graded"], 1)
    peak = max([m["count"] for _, m in items] + [1])
    return _hbars([(mid, m["count"] / peak, f"{m['count']} ({100 * m['count'] / graded:.0f}%)",
                    RED, f"{mid}: {m['count']} of {counted(graded, 'graded student')}")
                   for mid, m in items], 260, width, "misconceptions, most common first",
                  "misconceptions")


def checks_svg(summary: dict[str, Any], width: float = 1000) -> str:
    rows = []
    for name, c in lowest_checks(summary):
        colour = RED if c["pass_rate"] < 0.5 else AMBER if c["pass_rate"] < 0.9 else BLUE
        rows.append((_short(name), c["pass_rate"],
                     f"{100 * c['pass_rate']:.0f}% ({c['passed']}/{c['students']})", colour,
                     f"{name}: {c['passed']} of {c['students']} passed"))
    return _hbars(rows, 400, width, "checks with the lowest pass rates", "checks")


def statuses_svg(summary: dict[str, Any], width: float = 1000, height: float = 34) -> str:
    """One stacked bar: the share of each status."""
    total = max(sum(s["count"] for s in summary["statuses"].values()), 1)  # roster entries
    body, x = [], 0.0  # without a submission included
    for i, (key, s) in enumerate(summary["statuses"].items()):
        w = width * s["count"] / total
        colour = STATUS_COLOURS.get(key, [RED, AMBER, GREY, BLUE][i % 4])
        body.append(_rect(x, 0, w, height - 12, colour, f"{key}: {s['count']} of {total}"))
        if w >= 90:  # room for the label inside the segment
            body.append(_text(x + 6, height - 17, f"{key} {s['count']}", size=12,
                              colour="#fff"))
        x += w
    return _svg(width, height, "submissions by status", body, "statuses")


def _names_list(names: list[str]) -> str:
    return '<ul class="names">' + "".join(f"<li>{escape(n)}</li>" for n in names) + "</ul>"


def render(summary: dict[str, Any]) -> str:
    """The whole page (UTF-8 HTML)."""
    klass, total = summary["class"], summary["total"]
    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<title>Class report</title><style>", STYLE, "</style></head><body>",
           "<h1>Class report</h1>",
           f'<p class="lead">{counted(klass["students"], "submission")}, {klass["graded"]} '
           f'graded. Total out of {klass["points_possible"]}: mean {total.get("mean", "-")}, '
           f'median {total.get("median", "-")}; '
           f'{counted(len(summary["misconceptions"]), "misconception")} diagnosed.</p>']
    if summary.get("limits_missing"):
        out += ["<p>Graded without per-worker cgroups, so these limits were missing:</p><ul>",
                *(f"<li>{escape(m)}</li>" for m in summary["limits_missing"]), "</ul>"]
    out += ["<h2>Statuses</h2>", statuses_svg(summary), "<table><tr><th>status</th>"
            '<th class="num">students</th><th>who</th></tr>']
    for key, s in summary["statuses"].items():
        who = "" if key == "graded" else escape(", ".join(s["students"]))
        out.append(f'<tr><td>{escape(key)}</td><td class="num">{s["count"]}</td>'
                   f"<td>{who}</td></tr>")
    out.append("</table>")
    out += ["<h2>Score distributions</h2>",
            '<p class="lead">Students graded, by score; the green bar is full marks.</p>',
            '<div class="grid">', _figure("total", total, 1000, 180)]
    unattempted = []
    for name, stats in summary["exercises"].items():
        bonus = stats["track"] == "bonus"
        if bonus and not stats["graded"]:
            unattempted.append(name)
        else:
            out.append(_figure(name + (" (bonus)" if bonus else ""), stats))
    out.append("</div>")
    if unattempted:
        out.append(f'<p class="muted">Bonus exercises nobody attempted: '
                   f'{escape(", ".join(unattempted))}.</p>')
    out.append("<h2>Most common misconceptions</h2>")
    out.append(misconceptions_svg(summary) if summary["misconceptions"] else
               '<p class="muted">No misconception was diagnosed.</p>')
    out.append("<h2>Checks with the lowest pass rates</h2>")
    out.append(checks_svg(summary) if lowest_checks(summary) else
               '<p class="muted">Every check passed for every student.</p>')
    if "similarity" in summary:
        out += html_section(summary["similarity"])
    out += _mistakes(summary) + _problems(summary)
    out.append('<p class="muted">Written by <code>python -m grader</code> from the batch '
               "results; the same results give the same page.</p></body></html>")
    return "\n".join(out) + "\n"


def _figure(name: str, stats: dict[str, Any], width: float = 320, height: float = 150) -> str:
    caption = (f"<b>{escape(name)}</b> ({counted(stats['points_possible'], 'point')}): "
               f"{stats['graded']} graded")
    if stats["graded"]:
        caption += (f", mean {stats['mean']}, median {stats['median']}, "
                    f"full marks {stats['full_marks']}")
    if stats.get("not_attempted") and stats.get("track") == "core":  # they scored 0 above
        caption += f"; {len(stats['not_attempted'])} left the stub untouched"
    return (f'<figure style="width: {_n(width)}px">{histogram_svg(name, stats, width, height)}'
            f"<figcaption>{caption}</figcaption></figure>")


def _mistakes(summary: dict[str, Any]) -> list[str]:
    if not summary["misconceptions"]:
        return []
    out = ["<h2>Each misconception: its hint and who showed it</h2>"]
    for mid, m in summary["misconceptions"].items():
        where = ", ".join(f"{escape(e)} ({n})" for e, n in m["exercises"].items())
        out += [f'<section class="mistake"><h3><code>{escape(mid)}</code>: '
                f'{counted(m["count"], "student")}</h3>',
                f'<p class="hint">{escape(m["hint"])}</p>',
                f'<p class="muted">Named in: {where}</p>',
                f"<details open><summary>Students ({m['count']})</summary>"
                f"{_names_list(m['students'])}</details></section>"]
    return out


def _problems(summary: dict[str, Any]) -> list[str]:
    out = []
    errors = [(n, e["errors"]) for n, e in summary["exercises"].items() if e["errors"]]
    if errors:
        out += ["<h2>Exercises that could not be graded</h2>",
                "<table><tr><th>exercise</th><th>student</th><th>why</th></tr>"]
        for name, who in errors:
            out += [f'<tr><td>{escape(name)}</td><td class="who">{escape(s)}</td>'
                    f"<td>{escape(why)}</td></tr>" for s, why in who.items()]
        out.append("</table>")
    if summary["not_graded"]:
        out += ["<h2>Submissions not graded</h2>",
                "<table><tr><th>student</th><th>status</th></tr>"]
        out += [f'<tr><td class="who">{escape(s)}</td><td>{escape(why)}</td></tr>'
                for s, why in summary["not_graded"].items()]
        out.append("</table>")
    if summary.get("roster"):
        from .exports import issue_lines

        problems = issue_lines(summary["roster"])
        out += ["<h2>Roster</h2>", "<ul>" + "".join(f"<li>{escape(p)}</li>" for p in problems)
                + "</ul>" if problems else '<p class="muted">Every submission folder is in the '
                "roster, once, and every roster entry submitted.</p>"]
    return out
