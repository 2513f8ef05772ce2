"""``scan --format html`` and ``mlcopilot report``: one self-contained HTML file per scan.

Per model: its upstream graph as inline SVG, laid out in Python (:mod:`.layout`: the model at
the right, upstream to the left), so the picture is there without JavaScript; nodes coloured
by their worst finding, edges labelled by kind, the affected columns on dataset nodes,
coverage gaps and a truncated walk marked on the nodes. Then the findings (incident id,
state, age; why it matters, what to do, the evidence), the coverage gaps and the incident
timeline. A small inline script adds the interaction only: select a finding (click, Enter or
Space) to highlight its path, search the nodes, collapse the layers far from the model (a
graph of more than :data:`OPEN_NODES` opens so), describe a focused node.

Three parts, each in its own kind of file:

- the view model (:mod:`.html_view`, the graph's in :mod:`.html_graph`): the scan shaped
  into words and numbers, no markup;
- the templates (``templates/*.html.j2``, Jinja2): the markup, with autoescape;
- the style and the script (``static/report.css``, ``static/report.js``), inlined into the
  page, which stays one file.

Safety is the environment's, not each call's: every ``{{ value }}`` in a template is first
made :func:`inert` (control, bidi override and isolate, zero-width and other invisible
characters removed) and then escaped. Only :class:`markupsafe.Markup` is written as it is,
and only this module makes one: the package's CSS and JS, the script's JSON, and the
``lines`` filter's text kept on its lines. The file fetches nothing: no ``src=``, stylesheet
link, ``url()`` or ``@import``; the only addresses are ``<a href>`` links to DataHub's UI and
GitHub issues. The data the script needs is embedded once, as ``<script
type="application/json" id="report-data">`` with ``<``, ``>`` and ``&`` written as JSON
escapes, so no catalog text can close the script. The same scan renders to the same bytes:
nothing depends on the time of rendering, the machine or hash order.

The DOM is a contract the tests read (classes and ``data-`` attributes): ``tests/render_html``
without a browser, ``tests/browser`` in Chromium. Edge kinds are written as :data:`EDGE_KINDS`
names them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import cache
from importlib.resources import files
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from mlcopilot.model import CheckInfo, Incident
from mlcopilot.protocols import Catalog, Check, StateStore
from mlcopilot.report.html_graph import EDGE_KINDS, OPEN_NODES, RISKS, inert
from mlcopilot.report.html_view import Page, ReportLinks, page_view
from mlcopilot.report.summary import ScanOutcome
from mlcopilot.scan import ScanOptions, ScanResult, scan

__all__ = [
    "EDGE_KINDS",
    "OPEN_NODES",
    "RISKS",
    "ReportLinks",
    "inert",
    "render_html",
    "report_links",
    "report_page",
    "script_json",
]


def report_links(store: StateStore, datahub_url: str | None) -> ReportLinks:
    """The links the store knows: each incident occurrence's GitHub issue, with DataHub's UI.

    Every state counts (``StateStore.incident_refs``): an acknowledged or resolved incident
    keeps the link to the issue it was reported in. Only ``https://`` addresses are kept.
    """
    issues = {
        occurrence: ref.url
        for occurrence, ref in sorted(store.incident_refs("github").items())
        if ref.url and ref.url.startswith("https://")
    }
    return ReportLinks(datahub_url=datahub_url, issues=issues)


def report_page(
    catalog: Catalog,
    store: StateStore,
    checks: Sequence[Check],
    options: ScanOptions,
    *,
    datahub_url: str | None,
) -> tuple[ScanResult, str]:
    """The scan and the page ``mlcopilot report`` writes (and the demo, by this same code).

    ``options`` should be a dry run (a report records nothing). The page adds the store's
    incident history of the scanned models and every known GitHub issue link.
    """
    result = scan(catalog, store, checks, options)
    scanned = {report.urn for report in result.models}
    history = [i for i in store.incidents(include_resolved=True) if i.model in scanned]
    links = report_links(store, datahub_url)
    infos = [check.info for check in checks]
    page = render_html(result, history=history, links=links, checks=infos, title="mlcopilot report")
    return result, page


def script_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element: ``<``, ``>``, ``&`` escaped.

    No ``</script>`` or ``<!--`` can appear in it, whatever the strings hold; ``JSON.parse``
    reads the escapes back as the characters.
    """
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


PAGE_BUDGET = 10_000_000
"""Bytes a page may take (10 MB: small enough to attach to an issue, a mail or a CI run).

Past it, the models with the worst findings keep their sections (graph, findings, timeline)
as long as they fit; the others are listed with their tally, each a ``--model`` away from a
page of its own. One model is always shown in full, whatever its size.
"""


def render_html(
    result: ScanResult,
    *,
    closing: ScanOutcome | None = None,
    history: Sequence[Incident] | None = None,
    links: ReportLinks | None = None,
    checks: Sequence[CheckInfo] = (),
    title: str = "mlcopilot scan",
    budget: int = PAGE_BUDGET,
) -> str:
    """The report page of ``result``, within ``budget`` bytes where models allow it.

    Args:
        result: The scan.
        closing: Its summary (the gate's verdict); default: no gate.
        history: The incidents whose events make the timeline (``mlcopilot report``: the
            store's); default: the incidents this scan opened, saw again or resolved.
        links: DataHub's UI and GitHub issues, where known.
        checks: What the checks say of their findings (why it matters, what to do), shown
            with each finding of theirs; a check not given gets only its evidence shown.
        title: The page's heading.
        budget: The page's size in bytes past which models are summarised (see
            :data:`PAGE_BUDGET`).
    """
    page = page_view(
        result,
        # Without the time taken: the same scan renders to the same bytes.
        closing=ScanOutcome(result, closing.verdict if closing is not None else None),
        history=history,
        links=links or ReportLinks(),
        checks=checks,
        title=title,
    )
    html = _render(page)
    if len(html.encode("utf-8")) <= budget or len(page.models) <= 1:
        return html
    return _render(page.within(_detailed_within(page, html, budget), _megabytes(budget)))


def _render(page: Page) -> str:
    return (
        _environment()
        .get_template("page.html.j2")
        .render(
            page=page,
            style=_static("report.css"),
            script=_static("report.js"),
            data=Markup(script_json(page.script_data)),
        )
    )


def _detailed_within(page: Page, whole: str, budget: int) -> int:
    """How many of the page's models (worst first) fit in ``budget`` with everything else."""
    model = _environment().get_template("model.html.j2")
    sizes = [
        len(model.render(model=view).encode("utf-8"))
        + len(script_json(view.script_data).encode("utf-8"))
        for view in page.models
    ]
    # What is not a model's section or data (head, style, script, index), and per model in
    # the index or the closing list a generous line each.
    fixed = len(whole.encode("utf-8")) - sum(sizes)
    room = budget - fixed - 600 * len(page.models)
    detailed = 0
    for size in sizes:
        if size > room and detailed:
            break
        room -= size
        detailed += 1
    return detailed


def _megabytes(budget: int) -> str:
    return f"{budget / 1_000_000:g} MB"


@cache
def _environment() -> Environment:
    """The templates' environment: every value inert and escaped, no undefined name, no |safe.

    Whitespace: a block tag's line leaves nothing (``trim_blocks``, ``lstrip_blocks``) and a
    template's last newline is kept, so the page's lines are the templates' lines; ``-``
    joins what the page keeps on one line (see the note in ``page.html.j2``).
    """
    environment = Environment(
        loader=PackageLoader("mlcopilot.report", "templates"),
        autoescape=select_autoescape(("html.j2",), default_for_string=True, default=True),
        undefined=StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )
    environment.filters["lines"] = _lines
    # No template marks text safe: what is written unescaped is a Markup made here.
    del environment.filters["safe"]
    return environment


def _finalize(value: object) -> object:
    """Each ``{{ value }}`` before it is escaped: a string made inert; None refused."""
    if type(value) is str:
        return inert(value)
    if isinstance(value, Markup):
        return value
    if isinstance(value, str):  # a str subclass (an enum's value): its text
        return inert(str(value))
    if value is None:
        raise TypeError("None reached the page: the template should test for it")
    return value


def _lines(values: Iterable[str]) -> Markup:
    """The ``lines`` filter: each line inert and escaped, kept on its own line.

    For a node's tooltip and the evidence's ``<pre>``, where a newline in the page is meant
    but one inside a value (which :func:`inert` makes a space) is not.
    """
    return Markup("\n").join(escape(inert(value)) for value in values)


@cache
def _static(name: str) -> Markup:
    """``static/NAME`` of this package, to inline: our own CSS or JS, never catalog text."""
    text = files("mlcopilot.report").joinpath("static", name).read_text(encoding="utf-8")
    if "</" in text or "<!--" in text:
        raise ValueError(f"static/{name} holds '</' or '<!--': it could end its element early")
    return Markup(text.strip())
