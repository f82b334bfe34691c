"""Hostile sources: deep HTML, zip bombs, oversized files, private URLs, symlinks, SQLite writes.

Each test builds its hostile input itself (small: the caps are lowered where a
real attack would be large) and checks the source is refused or bounded by name
while the good file beside it is still read.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fastrag
from fastrag.cli import main
from fastrag.errors import SourceLimitError
from fastrag.store.loaders import LoadLimits, load_documents

ROOT = Path(__file__).resolve().parent.parent


def _collect(*args, **kwargs):
    failures = []
    docs = list(load_documents(*args, on_error=lambda p, r: failures.append((str(p), r)), **kwargs))
    return docs, failures


def _nested(depth: int, tag: str = "div") -> str:
    return (
        "<html><head><title>Deep</title></head><body><p>before</p>"
        + f"<{tag}>" * depth + "deep text" + f"</{tag}>" * depth
        + "<p>after</p></body></html>"
    )  # fmt: skip


def _tree_depth(html: str) -> int:
    """Depth of the tree lexbor builds (walked with a stack)."""
    from selectolax.lexbor import LexborHTMLParser

    best, stack = 0, [(LexborHTMLParser(html).root, 1)]
    while stack:
        node, depth = stack.pop()
        best = max(best, depth)
        child = node.child
        while child is not None:
            stack.append((child, depth + 1))
            child = child.next
    return best


# -- deeply nested HTML -------------------------------------------------------------------


@pytest.mark.parametrize("depth", [3_000, 200_000])
def test_deeply_nested_html_is_flattened_and_the_folder_indexed(tmp_path, depth):
    pytest.importorskip("selectolax")
    docs_dir = tmp_path / "docs"
    docs_dir.mkdir()
    (docs_dir / "deep.html").write_text(_nested(depth), encoding="utf-8")
    (docs_dir / "fine.md").write_text("# Fine\n\nThe coolant pump is checked daily.", "utf-8")
    docs, failures = _collect(docs_dir)
    assert failures == []
    by_id = {d["id"]: d for d in docs}
    assert sorted(by_id) == ["deep.html", "fine.md"]
    deep = by_id["deep.html"]["text"]
    assert deep.startswith("before") and deep.endswith("after") and "deep text" in deep
    assert by_id["deep.html"]["title"] == "Deep"

    kb = tmp_path / "kb"
    assert main(["index", str(docs_dir), "--kb", str(kb)]) == 0
    assert fastrag.KnowledgeBase.load(kb).stats()["documents"] == 2


def test_structure_above_the_depth_limit_is_kept(tmp_path):
    pytest.importorskip("selectolax")
    page = (
        "<body><h1>Top</h1><div><ul><li>one</li><li>two</li></ul></div>" + _nested(40) + "</body>"
    )
    (tmp_path / "p.html").write_text(page, encoding="utf-8")
    (doc,) = load_documents(tmp_path / "p.html", limits=LoadLimits(html_depth=16))
    blocks = doc["text"].split("\n\n")
    assert blocks[:3] == ["# Top", "- one", "- two"]
    assert "deep text" in doc["text"]


@pytest.mark.parametrize(
    "piece",
    [
        "<div>", "<div/>", "<span>", "<b id={i}>", "<div></span>", "<form><div></form>",
        "<li><section>", "<svg><div/>", "<svg><font color=red/>", "<p><svg><foreignObject><div>",
        "<table><tr><td>", "<div><b id={i}></div>x", "<div a=<>", "<!--><div>", "<dl><dd><div>",
        "<td><b id={i}></td>", "<h1><h2><div>", "<math><mi><div>", "<object><div>",
    ],
)  # fmt: skip
def test_no_markup_trick_nests_deeper_than_the_limit_allows(piece):
    # Whatever the page does, the tree lexbor builds from what is left stays shallow
    # (a small multiple of the limit), so parsing it stays linear.
    pytest.importorskip("selectolax")
    from fastrag.store.loaders.web import _limit_depth

    html = "<body>" + "".join(piece.format(i=i) for i in range(2_000)) + "end"
    assert _tree_depth(html) > 1_000  # the trick works on lexbor
    assert _tree_depth(_limit_depth(html, 32)) <= 4 * 32


def test_a_broad_page_is_not_flattened():
    pytest.importorskip("selectolax")
    from fastrag.store.loaders.web import _limit_depth

    broad = (
        "<body>" + "<p>para" * 600 + "<ul>" + "<li>item <b>x</b>" * 600 + "</ul><table>"
        + "<tr><td>a<td>b" * 600 + "</table><dl>" + "<dt>t<dd>d" * 600 + "</dl><select>"
        + "<option>o" * 600 + "</select>"
        + "<p><font color=red>x</font><i>y</i><svg><path/><g/></svg><script>'<div>'</script>" * 600
    )  # fmt: skip
    assert _limit_depth(broad, 32) is broad


def test_a_parser_that_recurses_costs_its_file_only(tmp_path, monkeypatch):
    from fastrag.store.loaders import web

    def recurse(path, doc_id, limits):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(web, "load", recurse)
    (tmp_path / "a.html").write_text("<p>x</p>", encoding="utf-8")
    (tmp_path / "b.md").write_text("fine", encoding="utf-8")
    docs, failures = _collect(tmp_path)
    assert [d["id"] for d in docs] == ["b.md"]
    assert failures == [(str(tmp_path / "a.html"), "nested too deeply to be read")]
    with pytest.raises(SourceLimitError, match="a.html: nested too deeply"):
        list(load_documents(tmp_path))


# -- the import cycle ---------------------------------------------------------------------


def test_the_loaders_do_not_import_the_sources_module():
    for path in (ROOT / "fastrag" / "store" / "loaders").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "sources" or node.level != 2, path
                assert node.module != "fastrag.store.sources", path
    from fastrag.store import loaders, sources

    assert sources.iter_documents is loaders.iter_documents  # the old names still work
    assert sources.DOCUMENT_SUFFIXES == loaders.DOCUMENT_SUFFIXES


# -- caps: zip bombs, big pages, long PDFs --------------------------------------------------


def _docx_bomb(path: Path, pad: int) -> Path:
    """A real .docx whose document.xml carries ``pad`` bytes of white space (deflates ~1000:1)."""
    import zipfile

    from fixtures_sources import write_docx

    good = write_docx(path.with_name("good-source.docx"))
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "word/document.xml":
                data = data.replace(b"<w:body>", b"<w:body>" + b" " * pad, 1)
            dst.writestr(info.filename, data)
    good.unlink()
    return path


def test_a_zip_bomb_docx_is_refused_by_name_and_the_rest_is_indexed(tmp_path):
    pytest.importorskip("docx")
    docs_dir = tmp_path / "docs"
    docs_dir.mkdir()
    bomb = _docx_bomb(docs_dir / "bomb.docx", 3 << 20)
    assert bomb.stat().st_size < 64 << 10  # 3 MiB of XML in a few KB
    (docs_dir / "fine.md").write_text("fine", encoding="utf-8")
    docs, failures = _collect(docs_dir)
    assert [d["id"] for d in docs] == ["fine.md"]
    ((where, why),) = failures
    assert where == str(bomb) and "word/document.xml" in why and "zip bomb" in why
    with pytest.raises(SourceLimitError, match="bomb.docx: the part 'word/document.xml' expands"):
        list(load_documents(bomb))
    # A part over the absolute cap, and text over the text cap, with the caps lowered.
    with pytest.raises(SourceLimitError, match=r"more than 10,000 \(LoadLimits.part_bytes\)"):
        list(load_documents(bomb, limits=LoadLimits(part_bytes=10_000)))
    from fixtures_sources import write_docx

    with pytest.raises(SourceLimitError, match="more than 20 characters of text"):
        list(load_documents(write_docx(tmp_path / "w.docx"), limits=LoadLimits(text_chars=20)))

    kb = tmp_path / "kb"
    assert main(["index", str(docs_dir), "--kb", str(kb)]) == 1  # reported, the rest indexed
    assert fastrag.KnowledgeBase.load(kb).stats()["documents"] == 1


def test_pdf_page_and_text_caps(tmp_path):
    pytest.importorskip("pdfplumber")
    from fixtures_sources import write_pdf

    pdf = write_pdf(tmp_path / "m.pdf")
    assert len(list(load_documents(pdf))) == 2
    with pytest.raises(SourceLimitError, match=r"m.pdf: 2 pages, more than 1 \(LoadLimits.pdf"):
        list(load_documents(pdf, limits=LoadLimits(pdf_pages=1)))
    with pytest.raises(SourceLimitError, match="m.pdf: more than 50 characters of text"):
        list(load_documents(pdf, limits=LoadLimits(text_chars=50)))


def test_an_html_page_over_the_size_cap_is_refused_and_the_rest_read(tmp_path):
    pytest.importorskip("selectolax")
    (tmp_path / "big.html").write_text("<p>" + "x" * 5_000 + "</p>", encoding="utf-8")
    (tmp_path / "small.html").write_text("<p>small page</p>", encoding="utf-8")
    docs, failures = _collect(tmp_path, limits=LoadLimits(part_bytes=1_000))
    assert [d["id"] for d in docs] == ["small.html"]
    assert failures == [
        (
            str(tmp_path / "big.html"),
            "5,007 bytes, more than the 1,000 an HTML page may have (LoadLimits.part_bytes)",
        )
    ]


def test_a_text_file_over_the_size_cap_is_refused(tmp_path):
    (tmp_path / "big.md").write_text("x" * 2_000, encoding="utf-8")
    (tmp_path / "a.jsonl").write_text('{"id": "j", "text": "streamed, not capped"}\n', "utf-8")
    docs, failures = _collect(tmp_path, limits=LoadLimits(part_bytes=1_000))
    assert [d["id"] for d in docs] == ["j"]
    assert failures[0][0] == str(tmp_path / "big.md") and "LoadLimits.part_bytes" in failures[0][1]


def test_limits_are_checked():
    from fastrag.errors import ConfigError

    with pytest.raises(ConfigError, match="part_bytes"):
        LoadLimits(part_bytes=0)
    with pytest.raises(ConfigError, match="fetch_seconds"):
        LoadLimits(fetch_seconds=0)


# -- symbolic links ------------------------------------------------------------------------


def _linked_folder(tmp_path: Path) -> tuple[Path, Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("root:x:0:0", encoding="utf-8")
    (outside / "more.md").write_text("outside folder", encoding="utf-8")
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "real.md").write_text("the real manual", encoding="utf-8")
    (docs / "sub" / "deeper.md").write_text("a deeper manual", encoding="utf-8")
    (docs / "passwd.txt").symlink_to(secret)  # ln -s /etc/passwd docs/passwd.txt
    (docs / "elsewhere").symlink_to(outside, target_is_directory=True)
    (docs / "alias.md").symlink_to(docs / "real.md")  # inside: followed
    (docs / "sub" / "loop").symlink_to(docs, target_is_directory=True)  # a cycle
    (docs / "sub" / "up.md").symlink_to(Path("..") / ".." / "outside" / "more.md")
    return docs, secret, outside


def test_symlinks_out_of_the_folder_are_skipped_and_reported(tmp_path):
    docs, secret, outside = _linked_folder(tmp_path)
    found, failures = _collect(docs)
    assert sorted(d["id"] for d in found) == ["alias.md", "real.md", "sub/deeper.md"]
    assert all("root:x" not in d["text"] for d in found)
    reasons = dict(failures)
    assert sorted(reasons) == sorted(
        str(docs / n) for n in ("elsewhere", "passwd.txt", "sub/up.md")
    )
    assert reasons[str(docs / "passwd.txt")] == (
        f"a symbolic link to the file {secret}, outside {docs}; not followed"
    )
    assert "the folder" in reasons[str(docs / "elsewhere")]
    # The lazy sources (fastrag index on an existing knowledge base) skip them too.
    from fastrag.store.loaders import resolve_sources

    told = []
    sources = list(resolve_sources(docs, on_error=lambda p, r: told.append(str(p))))
    assert sorted(s.doc_id for s in sources) == ["alias.md", "real.md", "sub/deeper.md"]
    assert sorted(told) == sorted(reasons)
    from fastrag.errors import SourceRefusedError

    with pytest.raises(SourceRefusedError, match="elsewhere: a symbolic link to the folder"):
        list(load_documents(docs))


def test_cli_index_skips_symlinks_out_of_the_folder(tmp_path, capsys):
    docs, _, _ = _linked_folder(tmp_path)
    kb = tmp_path / "kb"
    assert main(["index", str(docs), "--kb", str(kb)]) == 1
    err = capsys.readouterr().err
    assert f"{docs / 'passwd.txt'}: a symbolic link to the file" in err
    loaded = fastrag.KnowledgeBase.load(kb)
    assert loaded.stats()["documents"] == 3
    assert not [h for h in loaded.retrieve("root", k=5) if "root:x" in h.text]
    # and on the next run, which syncs the existing knowledge base
    assert main(["index", str(docs), "--kb", str(kb)]) == 1
    assert "passwd.txt" in capsys.readouterr().err
    assert fastrag.KnowledgeBase.load(kb).stats()["documents"] == 3


# -- SQLite: read-only for real ---------------------------------------------------------------


@pytest.mark.parametrize(
    "query, refused",
    [
        ("ATTACH DATABASE '{evil}' AS evil", "ATTACH"),
        ("VACUUM INTO '{evil}'", "ATTACH"),
        ("INSERT INTO repair_records (id, solution_text) VALUES (9, 'x') RETURNING id, id AS text",
         "INSERT repair_records"),
        ("DROP TABLE repair_records", "sqlite_master is not allowed"),
        ("DELETE FROM repair_records RETURNING id, id AS text", "DELETE repair_records"),
        ("PRAGMA user_version = 7", "PRAGMA user_version"),
        ("SELECT id, solution_text AS text FROM repair_records; ATTACH '{evil}' AS e", None),
    ],
)  # fmt: skip
def test_sqlite_queries_cannot_write_or_create_files(tmp_path, query, refused):
    import hashlib

    from fixtures_sources import write_sqlite

    from fastrag.errors import SourceError, SourceRefusedError

    db = write_sqlite(tmp_path / "repairs.db")
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    evil = tmp_path / "evil.db"
    error = SourceRefusedError if refused else SourceError
    with pytest.raises(error, match=refused or "one statement") as info:
        list(load_documents(f"sqlite:///{db}", query=query.format(evil=evil)))
    if refused:
        assert str(info.value).startswith(f"sqlite:///{db}: the database is opened readonly")
    assert not evil.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repairs.db"]
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_sqlite_through_sqlalchemy_is_guarded_too(tmp_path):
    pytest.importorskip("sqlalchemy")
    from fixtures_sources import QUERY, write_sqlite

    from fastrag.errors import SourceRefusedError

    db = write_sqlite(tmp_path / "repairs.db")
    evil = tmp_path / "evil.db"
    with pytest.raises(SourceRefusedError, match="ATTACH"):
        list(load_documents(f"sqlite+pysqlite:///{db}", query=f"ATTACH '{evil}' AS e"))
    assert not evil.exists()
    assert len(list(load_documents(f"sqlite+pysqlite:///{db}", query=QUERY))) == 3


def test_sqlite_reads_still_work_with_the_guard(tmp_path):
    from urllib.parse import quote

    from fixtures_sources import QUERY, write_sqlite

    db = write_sqlite(tmp_path / "odd ?name#%.db")  # characters a file: URI must quote
    url = f"sqlite:///{quote(str(db))}"
    docs = list(load_documents(url, query=QUERY, since="2026-01-20"))
    assert [d["id"] for d in docs] == ["2", "3"]
    rows = list(
        load_documents(
            url,
            query="WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) "
            "SELECT i AS id, (SELECT count(*) FROM pragma_table_info('repair_records')) AS text "
            "FROM n",
        )
    )
    assert [(d["id"], d["text"]) for d in rows] == [("1", "5"), ("2", "5"), ("3", "5")]


# -- web sources: private addresses, redirects, deadline, size ----------------------------------


@pytest.fixture()
def local_web():
    """Servers on 127.0.0.1 (started here): pages, a redirect, a drip, a huge body."""
    import http.server
    import threading

    stop = threading.Event()
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802 - the http.server name
            hits.append(self.path)
            if self.path.startswith("/redirect"):
                self.send_response(302)
                self.send_header("Location", self.path.split("to=", 1)[1])
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/drip":  # a byte now and then, forever, until the client leaves
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                while not stop.is_set():
                    try:
                        self.wfile.write(b"x")
                        self.wfile.flush()
                    except OSError:
                        return
                    stop.wait(0.05)
            elif self.path == "/huge":  # endless, no Content-Length
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Connection", "close")
                self.end_headers()
                block = b"y" * 65536
                while not stop.is_set():
                    try:
                        self.wfile.write(block)
                    except OSError:
                        return
            else:
                body = b"<html><title>Internal</title><p>internal secret page</p></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

    servers = []
    for _ in range(2):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    yield [s.server_address[1] for s in servers], hits
    stop.set()
    for server in servers:
        server.shutdown()
        server.server_close()


def test_private_addresses_are_refused_before_any_request(local_web):
    from fastrag.errors import SourceRefusedError

    (port, _), hits = local_web
    for host in ("127.0.0.1", "localhost", "0x7f000001", "[::ffff:127.0.0.1]"):
        url = f"http://{host}:{port}/page.html"
        with pytest.raises(SourceRefusedError, match="address; private addresses are not"):
            list(load_documents(url))
        docs, failures = _collect([url])
        assert docs == [] and "loopback" in failures[0][1]
    assert hits == []  # nothing reached the server


def test_a_redirect_to_a_private_address_is_refused(local_web, monkeypatch):
    # The first page is "public" (its address check is waved through for 127.0.0.1 only);
    # it redirects to a loopback page on the other server, which must be refused.
    from fastrag.errors import SourceRefusedError
    from fastrag.store.loaders import fetch as fetch_module

    (public, internal), hits = local_web
    real = fetch_module.check_address
    first = {"done": False}

    def check(ip):
        if not first["done"]:
            first["done"] = True
            return None
        return real(ip)

    monkeypatch.setattr(fetch_module, "check_address", check)
    for target in (f"http://127.0.0.1:{internal}/", f"http://localhost:{internal}/",
                   f"http://0x7f000001:{internal}/"):  # fmt: skip
        first["done"] = False
        hits.clear()
        url = f"http://127.0.0.1:{public}/redirect?to={target}"
        with pytest.raises(SourceRefusedError, match=f"{target}: the host .* loopback"):
            list(load_documents(url))
        assert hits == [f"/redirect?to={target}"]  # the internal page was never asked for


def test_allow_private_fetches_the_local_server(local_web, tmp_path):
    (port, other), _ = local_web
    url = f"http://127.0.0.1:{port}/page.html"
    (doc,) = load_documents(url, allow_private=True)
    assert doc["title"] == "Internal" and "internal secret page" in doc["text"]
    redirected = f"http://127.0.0.1:{port}/redirect?to=http://localhost:{other}/x.html"
    (doc,) = load_documents(redirected, allow_private=True)
    assert "internal secret page" in doc["text"]
    kb = tmp_path / "kb"
    assert main(["index", url, "--kb", str(kb)]) == 1  # refused, reported
    assert main(["index", url, "--kb", str(kb), "--allow-private", "--overwrite"]) == 0
    assert fastrag.KnowledgeBase.load(kb).stats()["documents"] == 1


def test_redirects_are_counted(local_web):
    (port, _), _ = local_web
    url = f"http://127.0.0.1:{port}/redirect?to=/redirect?to=/page.html"
    limits = LoadLimits(redirects=1)
    with pytest.raises(SourceLimitError, match=r"more than 1 redirects"):
        list(load_documents(url, allow_private=True, limits=limits))
    assert len(list(load_documents(url, allow_private=True))) == 1


def test_a_slow_drip_hits_the_total_deadline(local_web):
    (port, _), _ = local_web
    limits = LoadLimits(fetch_seconds=1.0)
    with pytest.raises(SourceLimitError, match=r"/drip: not fetched within 1 s"):
        list(load_documents(f"http://127.0.0.1:{port}/drip", allow_private=True, limits=limits))


def test_an_oversize_body_is_cut_at_the_cap(local_web):
    (port, _), _ = local_web
    limits = LoadLimits(part_bytes=1 << 20)
    with pytest.raises(SourceLimitError, match=r"more than 1,048,576 bytes .*stopped reading"):
        list(load_documents(f"http://127.0.0.1:{port}/huge", allow_private=True, limits=limits))
    with pytest.raises(SourceLimitError, match=r"the body is 63 bytes, more than 10 .*not read"):
        list(
            load_documents(
                f"http://127.0.0.1:{port}/p.html", allow_private=True,
                limits=LoadLimits(part_bytes=10),
            )
        )  # fmt: skip


def test_the_metadata_address_is_refused_without_connecting(monkeypatch):
    import socket

    from fastrag.errors import SourceRefusedError
    from fastrag.store.loaders.fetch import check_address

    def no_network(*args, **kwargs):
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    for url in (
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://user:hunter2@10.0.0.1/admin",
        "http://0.0.0.0:8080/",
    ):
        with pytest.raises(SourceRefusedError) as info:
            list(load_documents(url))
        assert "hunter2" not in str(info.value)  # credentials are never shown
    import ipaddress

    assert check_address(ipaddress.ip_address("169.254.169.254")) == "link-local"
    assert check_address(ipaddress.ip_address("100.100.100.200")) == "non-public"
    assert check_address(ipaddress.ip_address("224.0.0.1")) == "multicast"
    assert check_address(ipaddress.ip_address("::ffff:10.1.2.3")) == "private"
    assert check_address(ipaddress.ip_address("93.184.215.14")) is None
