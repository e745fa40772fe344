"""The HTML of `danlu.report`: one self-contained page (inline CSS, inline JS, SVG bars).

Every text that comes from the user's program or from the compiler (names, paths, reasons,
graphs, kernel sources) goes through `esc` (html.escape). Each section has an id, and the
table of contents links to them; each captured graph has its own anchor (`graph-N`).
"""

from __future__ import annotations

import html
import time

from .report import ReportData
from .stats import PHASES

SECTIONS = (
    ("summary", "Summary"),
    ("compile-time", "Compile time"),
    ("frames", "Compiled frames"),
    ("graph-breaks", "Graph breaks"),
    ("recompiles", "Recompiles and guards"),
    ("graphs", "Graphs"),
    ("kernels", "Generated kernels"),
    ("fallbacks", "Fallbacks"),
    ("memory", "Memory saved by the partitioner"),
)

PHASE_COLORS = {
    "capture": "#4e79a7",
    "autograd": "#f28e2b",
    "lowering": "#59a14f",
    "codegen": "#b07aa1",
    "backend compile": "#e15759",
    "other": "#9c9c9c",
}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;
background:#fafbfc}
header{background:#23263a;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:20px}header p{margin:4px 0 0;color:#c8cbe0;font-size:12px}
.layout{display:flex;align-items:flex-start}
nav#toc{position:sticky;top:0;min-width:210px;padding:14px 16px;border-right:1px solid #e2e5ea;
height:100vh;box-sizing:border-box;background:#fff}
nav#toc ol{padding-left:18px;margin:6px 0}nav#toc a{color:#2c5fa8;text-decoration:none}
nav#toc a:hover{text-decoration:underline}
main{padding:8px 28px 40px;min-width:0;flex:1}
section{margin:18px 0 26px}h2{border-bottom:2px solid #e2e5ea;padding-bottom:4px;font-size:18px}
h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0;width:100%}
th,td{border:1px solid #e2e5ea;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:#f4f5f7;border:1px solid #e2e5ea;padding:8px;overflow:auto;max-height:520px}
details{margin:4px 0}summary{cursor:pointer;color:#2c5fa8}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{background:#fff;border:1px solid #e2e5ea;border-radius:6px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:20px}.card span{color:#5b6275;font-size:12px}
.hint{color:#38643a}.bad{color:#a8322d}.muted{color:#7a8194}
.graph{background:#fff;border:1px solid #e2e5ea;border-radius:6px;padding:4px 14px;margin:10px 0}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
button{font-size:12px;margin-right:6px}
"""

JS = """
function setAll(open){document.querySelectorAll('details').forEach(function(d){d.open=open;});}
function openTarget(){var id=location.hash.slice(1);if(!id)return;var el=document.getElementById(id);
while(el){if(el.tagName==='DETAILS')el.open=true;el=el.parentElement;}}
window.addEventListener('hashchange',openTarget);window.addEventListener('load',openTarget);
"""


def esc(text) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def _seconds(s) -> str:
    return f"{s:.3f} s" if s is not None else "—"


def _bytes(n) -> str:
    if n is None:
        return "—"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _pre(text, cls="") -> str:
    return f"<pre{f' class={cls!r}' if cls else ''}><code>{esc(text)}</code></pre>"


def _details(title, body, open_=False, id_=None) -> str:
    attrs = (f' id="{esc(id_)}"' if id_ else "") + (" open" if open_ else "")
    return f"<details{attrs}><summary>{esc(title)}</summary>{body}</details>"


def _table(headers, rows, numeric=()) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    out = [f"<table><thead><tr>{head}</tr></thead><tbody>"]
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            raw = cell.html if isinstance(cell, Raw) else esc(cell)
            cells.append(f'<td class="num">{raw}</td>' if i in numeric else f"<td>{raw}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


class Raw:
    """Already-escaped HTML for a table cell."""

    def __init__(self, html_text: str):
        self.html = html_text


def _link(anchor, text) -> Raw:
    return Raw(f'<a href="#{esc(anchor)}">{esc(text)}</a>')


# ------------------------------------------------------------------------------- charts
def bar_chart(values: dict, width=560, bar_h=20, unit="s") -> str:
    """Horizontal bars, one per key (inline SVG)."""
    if not values:
        return '<p class="muted">nothing timed</p>'
    top = max(values.values()) or 1.0
    label_w, value_w = 130, 80
    plot_w = width - label_w - value_w
    h = bar_h * len(values) + 8
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{h}" '
        f'viewBox="0 0 {width} {h}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, (name, v) in enumerate(values.items()):
        y = 4 + i * bar_h
        w = max(1.0, plot_w * v / top)
        color = PHASE_COLORS.get(name, "#4e79a7")
        parts.append(
            f'<text x="{label_w - 6}" y="{y + bar_h * 0.7:.1f}" text-anchor="end" '
            f'font-size="12">{esc(name)}</text>'
            f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{bar_h - 4}" '
            f'fill="{color}"><title>{esc(name)}: {v:.4f} {unit}</title></rect>'
            f'<text x="{label_w + w + 6:.1f}" y="{y + bar_h * 0.7:.1f}" font-size="12">'
            f"{v:.3f} {unit}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def stacked_bars(rows: list, width=560, bar_h=18) -> str:
    """One stacked bar per (label, {phase: seconds}) row, on a common scale (inline SVG)."""
    rows = [(label, phases) for label, phases in rows if phases]
    if not rows:
        return ""
    top = max(sum(p.values()) for _, p in rows) or 1.0
    label_w, value_w = 80, 70
    plot_w = width - label_w - value_w
    h = bar_h * len(rows) + 8
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{h}" '
        f'viewBox="0 0 {width} {h}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, (label, phases) in enumerate(rows):
        y = 4 + i * bar_h
        x = float(label_w)
        parts.append(
            f'<text x="{label_w - 6}" y="{y + bar_h * 0.7:.1f}" text-anchor="end" '
            f'font-size="12">{esc(label)}</text>'
        )
        for phase in PHASES:
            v = phases.get(phase)
            if not v:
                continue
            w = plot_w * v / top
            parts.append(
                f'<rect x="{x:.1f}" y="{y + 2}" width="{max(w, 0.5):.1f}" height="{bar_h - 4}" '
                f'fill="{PHASE_COLORS[phase]}"><title>{esc(label)} {esc(phase)}: {v:.4f} s'
                "</title></rect>"
            )
            x += w
        total = sum(phases.values())
        parts.append(
            f'<text x="{x + 6:.1f}" y="{y + bar_h * 0.7:.1f}" font-size="12">{total:.3f} s</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _legend() -> str:
    items = "".join(
        f'<span><i style="background:{c}"></i>{esc(p)}</span>' for p, c in PHASE_COLORS.items()
    )
    return f'<div class="legend">{items}</div>'


# ------------------------------------------------------------------------------- sections
def _summary(d: ReportData) -> str:
    kernels = sum(k.kernels for g in d.graphs for k in g.kernel_graphs) + sum(
        k.kernels for k in d.unattached_kernels
    )
    cards = [
        (len(d.frames), "compiled frames"),
        (len(d.graphs), "captured graphs"),
        (sum(b.count for b in d.breaks), "graph breaks"),
        (len(d.recompiles), "recompiles"),
        (kernels, "generated kernels"),
        (len(d.fallbacks), "fallbacks"),
        (f"{sum(d.phases.values()):.2f} s", "compile time"),
    ]
    saved = sum(m.saved_by_partitioner or 0 for m in d.memory)
    if d.memory:
        cards.append((_bytes(saved), "saved by the partitioner"))
    body = "".join(
        f'<div class="card"><b>{esc(v)}</b><span>{esc(k)}</span></div>' for v, k in cards
    )
    return (
        f'<div class="cards">{body}</div><p class="muted">Everything compiled in process '
        f"{d.pid} since start or the last <code>danlu.reset()</code>.</p>"
    )


def _frames(d: ReportData) -> str:
    if not d.frames:
        return '<p class="muted">No frame was captured.</p>'
    rows = [
        (f.function, f"{f.file}:{f.line}", f.graphs, f.entries, f.breaks, len(f.recompiles))
        for f in d.frames
    ]
    return _table(
        ("function", "file:line", "graphs", "compiled entries", "graph breaks", "recompiles"),
        rows,
        numeric=(2, 3, 4, 5),
    ) + (
        '<p class="muted">Compiled entries: each version and each resume point after a break '
        "is one entry of the frame's cache.</p>"
    )


def _breaks(d: ReportData) -> str:
    if not d.breaks:
        return '<p class="hint">No graph breaks: each frame was captured whole.</p>'
    rows = [
        (b.user_loc, b.function, b.reason, b.count, Raw(f'<span class="hint">{esc(b.hint)}</span>'))
        for b in d.breaks
    ]
    return _table(("where (your code)", "in function", "reason", "times", "fix hint"), rows, (3,))


def _recompiles(d: ReportData) -> str:
    out = []
    if d.recompiles:
        out.append("<h3>Why each recompile happened</h3><ol>")
        out.extend(f"<li><code>{esc(r)}</code></li>" for r in d.recompiles)
        out.append("</ol>")
    else:
        out.append('<p class="hint">No recompiles.</p>')
    out.append("<h3>Guards of each graph</h3>")
    any_guards = False
    for g in d.graphs:
        if g.guards:
            any_guards = True
            out.append(
                _details(
                    f"graph {g.index}: {g.where or '?'} ({len(g.guards.splitlines())} guards)",
                    _pre(g.guards),
                )
            )
    if not any_guards:
        out.append('<p class="muted">No guards recorded.</p>')
    return "".join(out)


def _kernel_block(k, anchor) -> str:
    fallback = ", ".join(f"{op} ×{n}" for op, n in k.fallback_ops.items()) or "none"
    head = (
        f'<h4 id="{esc(anchor)}">{esc(k.label)}: {k.kernels} kernels, ATen fallbacks: '
        f"{esc(fallback)}</h4>"
    )
    if not k.alive:
        return head + '<p class="muted">(the compiled graph is no longer in memory)</p>'
    body = []
    if k.fallback_reason:
        body.append(f'<p class="bad">runs eagerly: {esc(k.fallback_reason)}</p>')
    if k.kernel_source:
        lang = "Triton" if k.language == "py" else "C++"
        title = f"{lang} kernel source ({len(k.kernel_source)} chars)"
        body.append(_details(title, _pre(k.kernel_source), id_=f"{anchor}-source"))
    if k.wrapper_source:
        body.append(_details("wrapper (Python)", _pre(k.wrapper_source)))
    return head + "".join(body)


def _graphs(d: ReportData) -> str:
    if not d.graphs:
        return '<p class="muted">No graph was handed to a backend.</p>'
    out = [
        _table(
            ("graph", "captured from", "ops", "inputs", "backend", "kernels", "ends with"),
            [
                (
                    _link(f"graph-{g.index}", f"graph {g.index}"),
                    g.where or "?",
                    g.ops,
                    g.inputs,
                    g.backend + (f" (graph cache {g.cache})" if g.cache else ""),
                    "—" if g.kernels is None else g.kernels,
                    g.ends_with or "return",
                )
                for g in d.graphs
            ],
            numeric=(2, 3, 5),
        )
    ]
    for g in d.graphs:
        parts = [f'<div class="graph" id="graph-{g.index}"><h3>graph {g.index}</h3>']
        parts.append(
            f"<p>captured from <code>{esc(g.where or '?')}</code>; {g.ops} ops, {g.inputs} "
            f"inputs; backend {esc(g.backend)} {g.backend_s:.3f} s; ends with "
            f"{esc(g.ends_with or 'return')}</p>"
        )
        if g.error:
            parts.append(f'<p class="bad">{esc(g.error)}</p>')
        if not g.alive:
            parts.append('<p class="muted">(the captured graph is no longer in memory)</p>')
        if g.captured:
            parts.append(_details("captured FX graph", _pre(g.captured)))
            parts.append(_details("captured FX graph as Python", _pre(g.captured_code)))
        if g.guards:
            parts.append(_details("guards", _pre(g.guards)))
        for a in g.aten:
            parts.append(_details(f"{a.kind} ATen graph", _pre(a.text)))
        for text in g.partition:
            parts.append(_details("partition: values saved for backward", _pre(text)))
        if g.cache == "hit":
            parts.append(
                '<p class="muted">Loaded from the graph cache: not traced or partitioned in '
                "this process.</p>"
            )
        if g.kernel_graphs:
            parts.append(
                f'<p>kernels: <a href="#kernels-graph-{g.index}">{sum(k.kernels for k in g.kernel_graphs)}'
                " generated kernels</a></p>"
            )
        parts.append("</div>")
        out.append("".join(parts))
    return "".join(out)


def _kernels(d: ReportData) -> str:
    out = []
    for g in d.graphs:
        if not g.kernel_graphs:
            continue
        out.append(f'<h3 id="kernels-graph-{g.index}">graph {g.index}</h3>')
        for i, k in enumerate(g.kernel_graphs):
            out.append(_kernel_block(k, f"kernels-graph-{g.index}-{i}"))
    for i, k in enumerate(d.unattached_kernels):
        out.append(_kernel_block(k, f"kernels-other-{i}"))
    return "".join(out) or '<p class="muted">No kernels were generated (no inductor graphs).</p>'


def _fallbacks(d: ReportData) -> str:
    if not d.fallbacks:
        return '<p class="hint">Nothing fell back: every op ran in generated kernels.</p>'
    return _table(("where", "what", "reason"), d.fallbacks)


def _compile_time(d: ReportData) -> str:
    total = sum(d.phases.values())
    out = [
        f"<p>Total {total:.3f} s over {len(d.graphs)} graphs.</p>",
        _legend(),
        bar_chart(d.phases),
    ]
    rows = [(f"graph {g.index}", g.phases) for g in d.graphs]
    chart = stacked_bars(rows)
    if chart:
        out.append("<h3>Per graph</h3>" + chart)
        out.append(
            _table(
                ("graph", *PHASES, "total"),
                [
                    (
                        f"graph {g.index}",
                        *(_seconds(g.phases.get(p)) if p in g.phases else "—" for p in PHASES),
                        _seconds(sum(g.phases.values())),
                    )
                    for g in d.graphs
                ],
                numeric=tuple(range(1, len(PHASES) + 2)),
            )
        )
    return "".join(out)


def _memory(d: ReportData) -> str:
    if not d.memory:
        return (
            '<p class="muted">No forward/backward partition in this process (inference only, '
            "graphs loaded from the graph cache, or a backend without aotautograd).</p>"
        )
    rows = [
        (
            _link(f"graph-{m.graph}", f"graph {m.graph}"),
            m.compilation,
            m.method,
            m.saved_values,
            _bytes(m.saved_bytes),
            _bytes(m.default_bytes),
            _bytes(m.saved_by_partitioner),
        )
        for m in d.memory
    ]
    total = sum(m.saved_by_partitioner or 0 for m in d.memory)
    return _table(
        (
            "graph",
            "compilation",
            "partitioner",
            "values saved",
            "bytes kept for backward",
            "default partition would keep",
            "saved",
        ),
        rows,
        numeric=(1, 3, 4, 5, 6),
    ) + (
        f"<p>In all, the partitioner keeps {esc(_bytes(total))} fewer for backward than saving "
        "every forward value the backward reads (inputs not counted: they are alive anyway). "
        "Sizes are per call, at the traced shapes.</p>"
    )


def render(d: ReportData) -> str:
    """The page, as text."""
    builders = {
        "summary": _summary,
        "frames": _frames,
        "graph-breaks": _breaks,
        "recompiles": _recompiles,
        "graphs": _graphs,
        "kernels": _kernels,
        "fallbacks": _fallbacks,
        "compile-time": _compile_time,
        "memory": _memory,
    }
    toc = "".join(f'<li><a href="#{sid}">{esc(title)}</a></li>' for sid, title in SECTIONS)
    body = "".join(
        f'<section id="{sid}"><h2>{esc(title)}</h2>{builders[sid](d)}</section>'
        for sid, title in SECTIONS
    )
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>danlu compile report</title><style>{CSS}</style></head><body>"
        f"<header><h1>danlu compile report</h1><p>{esc(stamp)} · pid {d.pid} · danlu "
        f"{esc(d.danlu_version)} · torch {esc(d.torch_version)}</p></header>"
        '<div class="layout"><nav id="toc"><b>Contents</b>'
        f"<ol>{toc}</ol>"
        '<button type="button" onclick="setAll(true)">expand all</button>'
        '<button type="button" onclick="setAll(false)">collapse all</button></nav>'
        f"<main>{body}</main></div><script>{JS}</script></body></html>\n"
    )
