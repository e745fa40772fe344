"""danlu.report: the HTML compile report, checked as text and, where Chromium is installed,
rendered by headless Chromium (DOM after load, anchors, a screenshot)."""

import html.parser
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import textwrap

import pytest
import torch

import danlu
from danlu.report import break_hint, collect
from danlu.report_html import SECTIONS, render

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None
)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.a(x))
        print("a graph break")  # BREAK_LINE
        return torch.tanh(self.b(h)).cumsum(0)  # cumsum: an ATen fallback in danlu-inductor


BREAK_LINE = next(
    i
    for i, line in enumerate(pathlib.Path(__file__).read_text().splitlines(), 1)
    if line.rstrip().endswith("# BREAK_LINE")
)


@pytest.fixture(scope="module")
def report_path(tmp_path_factory):
    """Train a model with a graph break, then call it with a new batch size (a recompile)."""
    danlu.reset()
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("report") / "report.html"
    with danlu.config.patch(graph_cache=False):
        model = danlu.compile(Model())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for batch in (4, 4, 6):
            model(torch.randn(batch, 8)).sum().backward()
            opt.step()
            opt.zero_grad()
        written = danlu.report(path)
    assert isinstance(written, danlu.Report) and written.path == path
    yield path
    danlu.reset()


class Page(html.parser.HTMLParser):
    """ids, the TOC's links, section ids, <details> and tags seen."""

    def __init__(self, text):
        super().__init__()
        self.ids, self.toc_links, self.sections, self.tags = [], [], [], []
        self.open_details = 0
        self._in_toc = 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "nav" and a.get("id") == "toc":
            self._in_toc = 1
        if tag == "a" and self._in_toc:
            self.toc_links.append(a.get("href"))
        if tag == "section":
            self.sections.append(a.get("id"))
        if tag == "details" and "open" in a:
            self.open_details += 1

    def handle_endtag(self, tag):
        if tag == "nav":
            self._in_toc = 0


def test_report_has_every_section_linked_from_the_toc(report_path):
    text = report_path.read_text()
    page = Page(text)
    assert page.sections == [sid for sid, _ in SECTIONS]
    assert page.toc_links == [f"#{sid}" for sid, _ in SECTIONS]
    assert len(page.ids) == len(set(page.ids)), "duplicate element ids"
    # every in-page link (TOC, graph table, kernels) resolves to an element id
    links = [h[1:] for h in _hrefs(text) if h.startswith("#")]
    assert links and set(links) <= set(page.ids)
    # self-contained: no external resource
    assert (
        "<link" not in text
        and "src=" not in text
        and "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    assert "https://" not in text


def _hrefs(text):
    class Links(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.hrefs = []

        def handle_starttag(self, tag, attrs):
            if tag == "a":
                self.hrefs.append(dict(attrs).get("href", ""))

    p = Links()
    p.feed(text)
    return p.hrefs


def _section(text, sid):
    start = text.index(f'<section id="{sid}">')
    return text[start : text.index("</section>", start)]


def test_report_contents(report_path):
    text = report_path.read_text()
    frames = _section(text, "frames")
    assert "forward" in frames and f"{__file__}:" in frames
    # the break at the user's line, with a hint
    breaks = _section(text, "graph-breaks")
    assert f"{__file__}:{BREAK_LINE}" in breaks
    assert "print()" in breaks and break_hint("print() (side effect on stdout)") in breaks
    # the recompile (batch 4 -> 6) and why, escaped; the guards of each graph
    recompiles = _section(text, "recompiles")
    assert "guard failed" in recompiles and "4 -&gt; 6" in recompiles
    assert "4 -> 6" not in text
    assert "TENSOR_MATCH" in recompiles and "L[&#x27;x&#x27;]" in recompiles
    # training: forward and backward ATen graphs, the partition
    graphs = _section(text, "graphs")
    assert 'id="graph-0"' in graphs
    assert "forward (compilation 0) ATen graph" in graphs
    assert "backward (compilation 0) ATen graph" in graphs
    assert "aten.mm" in graphs or "aten.addmm" in graphs
    # kernels in collapsible <details>, with their source
    kernels = _section(text, "kernels")
    assert '<details id="kernels-graph-0-0-source"><summary>C++ kernel source' in kernels
    assert "extern &quot;C&quot;" in kernels or "void " in kernels
    # the ATen fallback and its reason
    fallbacks = _section(text, "fallbacks")
    assert "aten.cumsum.default" in fallbacks and "no lowering for this op" in fallbacks
    # compile time as SVG bars, one per phase that ran
    timing = _section(text, "compile-time")
    assert timing.count("<svg") == 2  # totals and per graph
    for phase in ("capture", "autograd", "lowering", "codegen"):
        assert f">{phase}</text>" in timing
    # memory: the min-cut partitioner against the default partition
    memory = _section(text, "memory")
    assert "min_cut" in memory and "default partition would keep" in memory


def test_report_data_matches_compile_stats(report_path):
    data = collect()
    stats = danlu.CompileStats.current()
    assert len(data.graphs) == len(stats.graphs) >= 4  # 2 per version (break), 2 versions
    assert sum(b.count for b in data.breaks) == stats.graph_breaks
    assert data.recompiles
    assert data.memory and all(m.method == "min_cut" for m in data.memory)
    for m in data.memory:
        assert (
            m.default_bytes is not None
            and m.saved_by_partitioner == m.default_bytes - m.saved_bytes
        )
    kernels = sum(k.kernels for g in data.graphs for k in g.kernel_graphs)
    assert kernels == sum(k.kernels for k in stats.kernel_graphs) > 0


def test_user_text_is_escaped():
    from danlu.report import Break, ReportData

    evil = "<script>alert('x')</script> & \"quoted\""
    data = ReportData(
        frames=[],
        breaks=[Break(f"{evil}.py:3", evil, evil)],
        recompiles=[evil],
        graphs=[],
        fallbacks=[(evil, evil, evil)],
        phases={"capture": 0.5},
        memory=[],
        unattached_kernels=[],
    )
    text = render(data)
    assert "<script>alert" not in text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;quoted&quot;" in text
    assert text.count("<script>") == 1  # the page's own


def test_break_hints():
    assert "torch.where" in break_hint("data-dependent control flow: truth value of a tensor")
    assert ".item()" in break_hint("item() of a tensor (reads data)")
    assert "fullgraph=True" in break_hint("something new")


def test_report_as_context_manager_rewrites_at_exit(tmp_path):
    danlu.reset()
    path = tmp_path / "sub" / "r.html"
    with danlu.report(path):
        assert "captured graphs" in path.read_text()  # written at once
        before = path.read_text()
        fn = danlu.compile(lambda x: torch.sin(x) + 1, backend="eager")
        fn(torch.randn(3))
    after = path.read_text()
    assert 'id="graph-0"' in after and 'id="graph-0"' not in before
    danlu.reset()


def test_danlu_report_env_writes_at_exit(tmp_path):
    path = tmp_path / "exit.html"
    script = textwrap.dedent(
        """
        import torch, danlu
        f = danlu.compile(lambda x: torch.cos(x) * 2, backend="eager")
        f(torch.randn(4))
        """
    )
    env = dict(os.environ, DANLU_REPORT=str(path))
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=300)
    page = Page(path.read_text())
    assert "graph-0" in page.ids and page.sections == [sid for sid, _ in SECTIONS]


def _chromium(args, tmp_path, timeout=120):
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium(report_path, tmp_path):
    url = report_path.resolve().as_uri()
    # the DOM after load: every section rendered, every TOC anchor an element id; the page's
    # script opened the <details> holding the anchor the URL names
    run = _chromium(["--dump-dom", url], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    dom = Page(run.stdout)
    assert dom.sections == [sid for sid, _ in SECTIONS]
    assert dom.toc_links and all(h[1:] in dom.ids for h in dom.toc_links)
    assert "svg" in dom.tags and "rect" in dom.tags
    assert dom.open_details == 0  # everything collapsed
    run = _chromium(["--dump-dom", url + "#kernels-graph-0-0-source"], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert Page(run.stdout).open_details == 1  # the page's script opened the named <details>
    # a screenshot: a real PNG of the window size
    shot = tmp_path / "report.png"
    run = _chromium(["--window-size=1024,900", f"--screenshot={shot}", url], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1024, 900)
    assert len(data) > 20_000  # not a blank page
