"""HTML pages (``selectolax``, extra ``html``): one document per page.

Headings (``h1``-``h6``), paragraphs, list items, tables and preformatted
blocks become the structure the structure-aware chunker reads (see
:class:`~fastrag.store.loaders._common.Blocks`); a table's rows repeat its
header (``th`` cells, or the ``thead`` row) with each cell. Scripts, styles,
templates, forms and navigation (``nav``, ``role="navigation"``) are
dropped. ``<title>`` becomes ``title`` (else the first ``h1``, else the
file's stem). The page's date becomes ``updated_at``: the first of its
``<meta>`` tags (by ``name``, ``property``, ``http-equiv`` or ``itemprop``,
any case) that says when it was modified (``last-modified``,
``article:modified_time``, ``og:updated_time``, ``dcterms.modified``,
``DC.date.modified``, ``dateModified``), else when it was dated or
published (``date``, ``dcterms.date``, ``DC.date``, ``article:published_time``,
``datePublished``, ``dcterms.created``); ISO-8601 or an HTTP date
(``Tue, 02 Jan 2026 03:04:05 GMT``); a value that is neither is passed over.

Limits (:class:`~fastrag.store.loaders.LoadLimits`): a file larger than
``part_bytes`` or with more than ``text_chars`` characters of text is
refused (:class:`~fastrag.errors.SourceLimitError`). Elements nested deeper
than ``html_depth`` (256) are flattened: their tags are dropped before
parsing and their text joins the enclosing element's, so a page nested
200,000 deep is read in linear time instead of failing (or parsing for
hours: the HTML tree builder is quadratic in the nesting depth). The page is
walked with an explicit stack, never by recursion.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...errors import SourceError, SourceLimitError
from ..documents import parse_updated_at
from ._common import DEFAULT_LIMITS, Blocks, LoadLimits, check_text, clean, require, table_rows

__all__ = ["SUFFIXES", "html_document", "load"]

SUFFIXES = (".html", ".htm")

_DROP = "script, style, noscript, template, nav, form, svg, iframe, [role=navigation], [hidden]"
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_CONTAINERS = {
    "html", "body", "main", "article", "section", "div", "header", "footer", "aside",
    "blockquote", "figure", "figcaption", "details", "summary", "center", "dl", "dd", "dt",
    "address", "fieldset", "hgroup",
}  # fmt: skip


# -- nesting depth, bounded before lexbor parses ------------------------------------------
#
# lexbor's tree builder scans the stack of open elements for many tags, so a page
# nested n deep costs O(n^2) to parse (200,000 nested <div> take many minutes).
# _limit_depth reads the tags in one linear pass with a model of the HTML tree
# builder that never pops an element unless lexbor surely does too (so it never
# sees the page shallower than lexbor will, up to a small factor), and drops the
# tags it places deeper than the limit: their text stays, joined to the
# enclosing element's.

_VOID = frozenset(
    "area base basefont bgsound br col embed frame hr img input keygen link meta param "
    "source track wbr".split()
)
_RAW = frozenset("script style xmp iframe noembed noframes textarea title".split())
_IGNORED = frozenset("html head body frameset".split())  # never a new element of their own
_FORMATTING = frozenset("a b big code em font i nobr s small strike strong tt u".split())
_MARKERS = frozenset("applet caption marquee object template td th".split())
_SCOPE = (
    "applet", "caption", "html", "marquee", "object", "table", "td", "template", "th",
    "mi", "mo", "mn", "ms", "mtext", "annotation-xml", "foreignobject", "desc", "title",
)  # fmt: skip
_CLOSES_P = frozenset(
    "address article aside blockquote center details dialog dir div dl fieldset figcaption "
    "figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr listing main menu nav ol p pre "
    "search section summary table ul li dd dt xmp plaintext".split()
)
_SPECIAL = frozenset(
    "address applet area article aside base basefont bgsound blockquote body br button caption "
    "center col colgroup dd details dir div dl dt embed fieldset figcaption figure footer form "
    "frame frameset h1 h2 h3 h4 h5 h6 head header hgroup hr html iframe img input keygen li "
    "link listing main marquee menu meta nav noembed noframes noscript object ol p param "
    "plaintext pre script search section select source style summary table tbody td template "
    "textarea tfoot th thead title tr track ul wbr xmp".split()
) | frozenset(_SCOPE)
_TABLE_PARTS = frozenset(("td", "th", "tr", "tbody", "thead", "tfoot"))
_TABLE_ONLY = _TABLE_PARTS | {"caption", "colgroup"}
_BLOCK_END = _SPECIAL - _VOID - _IGNORED - _RAW - _TABLE_PARTS - frozenset(_SCOPE[9:]) - {"form"}
"""End tags that pop every element above theirs, up to a scope boundary (``</form>`` does not)."""
_HEADING_NAMES = ("h1", "h2", "h3", "h4", "h5", "h6")
_BREAKOUT = frozenset(
    "b big blockquote body br center code dd div dl dt em embed font h1 h2 h3 h4 h5 h6 head hr "
    "i img li listing menu meta nobr ol p pre ruby s small span strong strike sub sup table tt "
    "u ul var".split()
)
_INTEGRATION = ("foreignobject", "desc", "title", "annotation-xml", "mi", "mo", "mn", "ms", "mtext")
_INLINE = _FORMATTING | frozenset(
    "abbr cite dfn kbd label mark q samp span sub sup time var".split()
)
_TOKEN = re.compile(r"<(?:(!--)|[!?]|(/?)([A-Za-z][^\s/>]*))")
_RAW_END = {name: re.compile(rf"</{name}", re.IGNORECASE) for name in _RAW}
_COMMENT_END = re.compile(r"--!?>")


class _Tree:
    """The stack of open elements (names) and what lexbor could reconstruct on top of it."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.at: dict[str, list[int]] = {}  # name -> indices in stack, innermost last
        self.formatting: list[dict[str, int]] = [{}]  # active formatting, per marker level
        self.n_formatting = 0

    @property
    def depth(self) -> int:
        """An upper bound of lexbor's depth here: open elements plus reconstructible ones."""
        return len(self.stack) + self.n_formatting

    def nearest(self, *names: str) -> int:
        """Index of the innermost open element of one of ``names`` (-1: none)."""
        best = -1
        for name in names:
            where = self.at.get(name)
            if where and where[-1] > best:
                best = where[-1]
        return best

    def push(self, name: str) -> None:
        self.at.setdefault(name, []).append(len(self.stack))
        self.stack.append(name)
        if name in _MARKERS:
            self.formatting.append({})
        elif name in _FORMATTING:
            level = self.formatting[-1]
            level[name] = level.get(name, 0) + 1
            self.n_formatting += 1

    def pop_to(self, index: int) -> None:
        """Pop the element at ``index`` and every element above it."""
        while len(self.stack) > index:
            name = self.stack.pop()
            self.at[name].pop()
            if name in _MARKERS and len(self.formatting) > 1:
                self.n_formatting -= sum(self.formatting.pop().values())

    def end_formatting(self, name: str) -> None:
        level = self.formatting[-1]
        if level.get(name, 0) > 0:
            level[name] -= 1
            self.n_formatting -= 1

    def close_item(self, names: tuple[str, ...]) -> None:
        """``<li>``, ``<dd>``, ``<dt>``: close an open one when only div/p/inline stand between."""
        index = self.nearest(*names)
        if index < 0 or len(self.stack) - index > 16:
            return
        between = self.stack[index + 1 :]
        if all(n not in _SPECIAL or n in ("address", "div", "p") for n in between):
            self.pop_to(index)

    def in_foreign(self) -> bool:
        if not (self.at.get("svg") or self.at.get("math")):
            return False
        return self.nearest("svg", "math") > self.nearest(*_INTEGRATION)

    def start(self, name: str, self_closing: bool) -> bool:
        """Apply a start tag; return whether it opened an element."""
        if self.in_foreign():
            if name not in _BREAKOUT:
                if self_closing:
                    return False
                self.push(name)
                return True
            self.pop_to(self.nearest("svg", "math"))
        if name in _IGNORED or name in _VOID:
            return False
        if name in _TABLE_ONLY and self.nearest("table", "template") < 0:
            return False  # outside a table lexbor ignores it
        if name in _CLOSES_P:
            p = self.nearest("p")
            if p > self.nearest(*_SCOPE, "button"):
                self.pop_to(p)
        if name == "li":
            self.close_item(("li",))
        elif name in ("dd", "dt"):
            self.close_item(("dd", "dt"))
        elif name in _HEADING_NAMES and self.stack and self.stack[-1] in _HEADING_NAMES:
            self.pop_to(len(self.stack) - 1)
        elif name in _TABLE_PARTS:
            table = self.nearest("table")
            group = {"td": ("td", "th"), "th": ("td", "th"), "tr": ("tr",)}.get(
                name, ("tbody", "thead", "tfoot")
            )
            cell = self.nearest(*group)
            if cell > table and (name not in ("td", "th") or cell > self.nearest("tr")):
                self.pop_to(cell)
        elif name in ("option", "optgroup"):
            if self.stack and self.stack[-1] == "option":
                self.pop_to(len(self.stack) - 1)
            if name == "optgroup" and self.stack and self.stack[-1] == "optgroup":
                self.pop_to(len(self.stack) - 1)
        elif name == "a" and self.formatting[-1].get("a"):
            self.end_formatting("a")  # the adoption agency takes the old <a> off the list
        if name in ("svg", "math") and self_closing:
            return False
        self.push(name)
        return True

    def end(self, name: str) -> None:
        """Apply an end tag (pops only what lexbor surely pops too)."""
        if name in _IGNORED:
            return
        top = self.stack[-1] if self.stack else None
        if self.in_foreign() or name in ("svg", "math"):
            index = self.nearest(name)
            if index > self.nearest(*_INTEGRATION) or index == len(self.stack) - 1:
                self.pop_to(index)
            return
        if name in _HEADING_NAMES:
            index = self.nearest(*_HEADING_NAMES)
        elif name in _BLOCK_END or name in _TABLE_PARTS:
            index = self.nearest(name)
        else:
            if top == name:
                self.pop_to(len(self.stack) - 1)
                if name in _FORMATTING:
                    self.end_formatting(name)
            elif name in _FORMATTING and not self.at.get(name):
                self.end_formatting(name)
            return
        if index < 0:
            return
        if name == "table":
            boundaries: tuple[str, ...] = ("html", "template")
        elif name in _TABLE_PARTS:
            boundaries = ("html", "table", "template")
        else:
            extra = {"p": ("button",), "li": ("ol", "ul")}.get(name, ())
            boundaries = _SCOPE + extra
        if index > self.nearest(*boundaries):
            self.pop_to(index)


def _limit_depth(html: str, limit: int) -> str:
    """``html`` without the tags that would nest deeper than ``limit`` (their text kept).

    One pass, linear in the length of the page; returns ``html`` itself when
    nothing is that deep.
    """
    if html.count("<") <= limit:
        return html  # too few tags to nest that deep
    tree = _Tree()
    stack = tree.stack
    dropped: dict[str, int] = {}  # name -> dropped start tags not yet closed
    out: list[str] = []
    last = 0  # html[last:] is not in out yet
    pos = 0
    gt = -1  # the first '>' at or after the current tag's name
    n = len(html)
    search = _TOKEN.search
    while (m := search(html, pos)) is not None:
        pos = m.start()
        if m.group(3) is None:  # a comment, a doctype, a processing instruction
            if m.group(1):
                end = _COMMENT_END.search(html, pos + 2)
                pos = n if end is None else end.end()
            else:
                end_gt = html.find(">", pos)
                pos = n if end_gt < 0 else end_gt + 1
            continue
        after = m.end()
        if gt < after:
            gt = html.find(">", after)
            if gt < 0:
                break  # a tag cut off by the end of the page: lexbor drops it
        name = m.group(3).lower()
        tag_end = gt + 1
        keep = True
        if m.group(2):
            if dropped.get(name):
                dropped[name] -= 1
                keep = False
            else:
                tree.end(name)
        elif len(stack) + tree.n_formatting >= limit and name not in _VOID and name not in _RAW:
            dropped[name] = dropped.get(name, 0) + 1
            keep = False
        else:
            foreign = tree.in_foreign()
            tree.start(name, html[gt - 1] == "/" and gt - 1 >= after)
            if not foreign and name in _RAW:  # its content is text, up to its end tag
                end = _RAW_END[name].search(html, tag_end)
                tag_end = n if end is None else end.start()
            elif not foreign and name == "plaintext":
                break
        if not keep:
            out.append(html[last:pos])
            out.append("" if name in _INLINE else " ")
            last = tag_end
        pos = tag_end
    if not out:
        return html
    out.append(html[last:])
    return "".join(out)


def _text(node: Any) -> str:
    return clean(node.text(deep=True, separator=" "))


def _inline_text(node: Any) -> str:
    # Inline pieces join without an added separator ("<b>bo</b>ld" is "bold").
    return node.text(deep=True, separator="")


def _table(node: Any, blocks: Blocks) -> None:
    caption = node.css_first("caption")
    if caption is not None:
        blocks.paragraph(_text(caption))  # before the rows, which are units of their own
    rows = []
    header = False
    for i, tr in enumerate(node.css("tr")):
        cells = [c for c in tr.iter() if c.tag in ("td", "th")]
        if i == 0:
            parent = tr.parent
            header = bool(cells) and (
                all(c.tag == "th" for c in cells) or (parent is not None and parent.tag == "thead")
            )
        rows.append([_text(c) for c in cells])
    blocks.rows(table_rows(rows, header=header))


# The walk: each step is a generator that writes a node's blocks and yields the
# (step, child) pairs to walk inside it; _run keeps them on an explicit stack, so
# nesting costs list entries, not Python frames.
_Step = Callable[[Any, Blocks], Iterator[tuple[Any, Any]]]


def _list(node: Any, blocks: Blocks) -> Iterator[tuple[_Step, Any]]:
    for li in node.iter():
        if li.tag != "li":
            yield _walk, li
            continue
        own, nested = [], []
        for c in li.iter(include_text=True):
            if c.tag in ("ul", "ol"):
                nested.append(c)  # walked after the item's own text
            elif c.tag == "-text":
                own.append(c.text_content or "")
            else:
                own.append(" " + _inline_text(c) + " " if c.tag in _CONTAINERS else _inline_text(c))
        blocks.item("".join(own))
        for c in nested:
            yield _list, c


def _walk(node: Any, blocks: Blocks) -> Iterator[tuple[_Step, Any]]:
    inline: list[str] = []

    def flush() -> None:
        if inline:
            blocks.paragraph("".join(inline))
            inline.clear()

    for child in node.iter(include_text=True):
        tag = child.tag
        if tag == "-text":
            inline.append(child.text_content or "")
        elif tag in _HEADINGS:
            flush()
            blocks.heading(_text(child), _HEADINGS[tag])
        elif tag == "p":
            flush()
            blocks.paragraph(_inline_text(child))
        elif tag in ("ul", "ol", "menu"):
            flush()
            yield _list, child
        elif tag == "li":
            flush()
            blocks.item(_text(child))
        elif tag == "table":
            flush()
            _table(child, blocks)
        elif tag == "pre":
            flush()
            blocks.code(child.text(deep=True, separator=""))
        elif tag in ("br", "hr"):
            inline.append(" ")
        elif tag in _CONTAINERS:
            flush()
            yield _walk, child
        elif tag in ("-comment", "head", "title", "meta", "link", "img"):
            continue
        else:
            inline.append(_inline_text(child))
    flush()


def _run(root: Any, blocks: Blocks, depth: int) -> None:
    """Walk ``root`` into ``blocks``; structure nested deeper than ``depth`` becomes a paragraph."""
    stack = [_walk(root, blocks)]
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
        elif len(stack) >= depth:
            blocks.paragraph(_text(step[1]))
        else:
            stack.append(step[0](step[1], blocks))


_DATE_META = (
    "last-modified", "article:modified_time", "og:updated_time", "dcterms.modified",
    "dc.date.modified", "datemodified", "date", "dcterms.date", "dc.date",
    "article:published_time", "datepublished", "dcterms.created", "dc.date.created",
)  # fmt: skip
"""``<meta>`` names of a page's date, the modification dates first."""


def _meta_date(tree: Any, where: str) -> Any:
    """The page's date from its ``<meta>`` tags (see the module notes), or None."""
    import email.utils

    found: dict[str, str] = {}
    for meta in tree.css("meta"):
        attrs = meta.attributes
        content = (attrs.get("content") or "").strip()
        if not content:
            continue
        for attr in ("name", "property", "http-equiv", "itemprop"):
            key = (attrs.get(attr) or "").strip().lower()
            if key:
                found.setdefault(key, content)
    for key in _DATE_META:
        value = found.get(key)
        if value is None:
            continue
        try:
            return parse_updated_at(value, where=where)
        except ValueError:
            pass
        try:
            return parse_updated_at(email.utils.parsedate_to_datetime(value), where=where)
        except (TypeError, ValueError, IndexError):
            continue
    return None


def html_document(
    html: str,
    *,
    doc_id: str,
    source: str | None,
    fallback_title: str,
    limits: LoadLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """The document of one HTML page (see the module notes)."""
    parser = require("selectolax.lexbor", "html", "reading HTML pages")
    where = source or doc_id
    html = _limit_depth(html, limits.html_depth)
    try:
        tree = parser.LexborHTMLParser(html)
    except Exception as exc:  # lexbor refuses very little; name what it does refuse
        raise SourceError(f"{source or doc_id}: not parseable as HTML: {exc}") from exc
    title_node = tree.css_first("title")
    title = _text(title_node) if title_node is not None else ""
    updated = _meta_date(tree, where)
    for node in tree.css(_DROP):
        node.decompose()
    if not title:
        h1 = tree.css_first("h1")
        title = _text(h1) if h1 is not None else ""
    blocks = Blocks()
    root = tree.body if tree.body is not None else tree.root
    if root is not None:
        _run(root, blocks, limits.html_depth)
    text = blocks.text()
    check_text(len(text), limits, where)
    doc: dict[str, Any] = {
        "id": doc_id, "text": text, "title": title or fallback_title, "format": "html",
    }  # fmt: skip
    if source is not None:
        doc["source"] = source
    if updated is not None:
        doc["updated_at"] = updated
    return doc


def load(path: Path, doc_id: str, limits: LoadLimits = DEFAULT_LIMITS) -> Iterator[dict[str, Any]]:
    """Yield the page as one document."""
    size = path.stat().st_size
    if size > limits.part_bytes:
        raise SourceLimitError(
            f"{path}: {size:,} bytes, more than the {limits.part_bytes:,} an HTML page may have "
            "(LoadLimits.part_bytes)"
        )
    raw = path.read_bytes()
    try:
        html = raw.decode("utf-8")
    except UnicodeDecodeError:
        html = raw.decode("cp1252", errors="replace")
    yield html_document(
        html, doc_id=doc_id, source=str(path), fallback_title=path.stem, limits=limits
    )
