"""SQL as a tool: read-only SELECTs over allow-listed columns, against SQLite and PostgreSQL (issue 25).

The PostgreSQL server is started by the test (Debian's postgresql-15 binaries: a throwaway
cluster in a temporary folder, on a free 127.0.0.1 port, run as the ``postgres`` user when
the tests run as root, as ``postgres`` refuses root).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from serve_harness import ThreadServer, save_kb

import fastrag
from fastrag.errors import ConfigError, SqlQueryError
from fastrag.serve import ServeSettings
from fastrag.serve.settings import parse_sql_tables

TABLES = {
    "repair_records": ["id", "fault_code", "machine_id", "solution_text"],
    "machines": ["id", "model"],
}
ROWS = [
    (1, "SV0432", "M1", "Replace the spindle fan", "secret-1"),
    (2, "SV0432", "M2", "Clean the amplifier filter", "secret-2"),
    (3, "OT0500", "M1", "Reset the overtravel limit", "secret-3"),
]
MACHINES = [("M1", "FANUC-0iMD"), ("M2", "FANUC-0iTF")]
SCHEMA = [
    "CREATE TABLE repair_records (id INTEGER PRIMARY KEY, fault_code TEXT, machine_id TEXT, "
    "solution_text TEXT, secret TEXT)",
    "CREATE TABLE machines (id TEXT PRIMARY KEY, model TEXT)",
    "CREATE TABLE staff (id INTEGER PRIMARY KEY, name TEXT)",
]

# Refused whatever the database: writes, other statements, disallowed tables, columns and
# functions, injection through identifiers and limits.
REFUSED = [
    "INSERT INTO repair_records (id, fault_code) VALUES (9, 'X')",
    "UPDATE repair_records SET solution_text = 'x'",
    "DELETE FROM repair_records",
    "DROP TABLE repair_records",
    "ALTER TABLE repair_records ADD COLUMN y TEXT",
    "CREATE TABLE evil (id INTEGER)",
    "ATTACH DATABASE '/tmp/fastrag-evil.db' AS evil",
    "PRAGMA writable_schema = ON",
    "PRAGMA table_info(repair_records)",
    "VACUUM INTO '/tmp/fastrag-evil.db'",
    "VACUUM",
    "SELECT 1; DROP TABLE repair_records",
    "SELECT id FROM repair_records; DELETE FROM repair_records",
    "SELECT id INTO evil FROM repair_records",
    "WITH x AS (DELETE FROM repair_records RETURNING id) SELECT id FROM x",
    "WITH x AS (SELECT id FROM repair_records) SELECT id FROM x",
    "SELECT id FROM repair_records FOR UPDATE",
    "SELECT secret FROM repair_records",
    "SELECT * FROM repair_records",
    "SELECT r.* FROM repair_records r",
    "SELECT id FROM staff",
    "SELECT name FROM sqlite_master",
    "SELECT id FROM main.repair_records",
    "SELECT id FROM public.repair_records",
    'SELECT id FROM "repair_records; DROP TABLE machines"',
    "SELECT id FROM repair_records WHERE id IN (SELECT id FROM staff)",
    "SELECT id FROM repair_records WHERE solution_text IN (SELECT secret FROM repair_records)",
    "SELECT load_extension('/tmp/evil.so')",
    "SELECT readfile('/etc/passwd')",
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT set_config('default_transaction_read_only', 'off', false)",
    "SELECT pg_sleep(10)",
    "SELECT id FROM repair_records LIMIT 1; DROP TABLE machines",
    "SELECT id FROM repair_records LIMIT (SELECT 1)",
    "SELECT id FROM repair_records LIMIT :n",
    "SELECT id FROM repair_records WHERE id = ?",
    "",
    "   ",
]


def _digest(read_all):
    return hashlib.sha256(json.dumps(read_all(), default=str).encode()).hexdigest()


# -- SQLite ------------------------------------------------------------------------------


@pytest.fixture
def sqlite_db(tmp_path):
    path = tmp_path / "repairs.db"
    conn = sqlite3.connect(path)
    for statement in SCHEMA:
        conn.execute(statement)
    conn.executemany("INSERT INTO repair_records VALUES (?, ?, ?, ?, ?)", ROWS)
    conn.executemany("INSERT INTO machines VALUES (?, ?)", MACHINES)
    conn.execute("INSERT INTO staff VALUES (1, 'Alice')")
    conn.commit()
    conn.close()
    return path


def _sqlite_state(path):
    conn = sqlite3.connect(path)
    try:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        tables = [name for kind, name, _ in schema if kind == "table"]
        rows = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}
        return {"schema": schema, **rows}
    finally:
        conn.close()


def test_sqlite_rows_columns_and_citations(sqlite_db):
    tool = fastrag.SqlTool(f"sqlite:///{sqlite_db}", tables=TABLES)
    result = tool.query(
        "SELECT solution_text FROM repair_records WHERE fault_code = :code ORDER BY id",
        {"code": "SV0432"},
    )
    assert isinstance(result, fastrag.SqlResult)
    assert result.columns == ("solution_text",)
    assert result.rows == [
        {"solution_text": "Replace the spindle fan"},
        {"solution_text": "Clean the amplifier filter"},
    ]
    assert [(c.table, c.key) for c in result.citations] == [
        ("repair_records", {"id": 1}),
        ("repair_records", {"id": 2}),
    ]
    assert all(c.source == f"sqlite:///{sqlite_db}" for c in result.citations)
    joined = tool.query(
        "SELECT r.solution_text, m.model FROM repair_records r JOIN machines m "
        "ON m.id = r.machine_id WHERE r.fault_code = :code ORDER BY r.id",
        {"code": "SV0432"},
    )
    assert joined.rows[0] == {"solution_text": "Replace the spindle fan", "model": "FANUC-0iMD"}
    assert [(c.table, c.key) for c in joined.citations[:2]] == [
        ("repair_records", {"id": 1}),
        ("machines", {"id": "M1"}),
    ]
    counted = tool.query("SELECT fault_code, COUNT(*) AS n FROM repair_records GROUP BY fault_code")
    assert {r["fault_code"]: r["n"] for r in counted.rows} == {"SV0432": 2, "OT0500": 1}
    assert [(c.table, c.key) for c in counted.citations] == [("repair_records", None)]
    assert json.loads(json.dumps(result.to_dict()))["citations"][0]["key"] == {"id": 1}


def test_sqlite_row_limits(sqlite_db):
    tool = fastrag.SqlTool(f"sqlite:///{sqlite_db}", tables=TABLES, max_rows=2)
    result = tool.query("SELECT id FROM repair_records ORDER BY id")
    assert [r["id"] for r in result.rows] == [1, 2] and result.truncated
    assert [r["id"] for r in tool.query("SELECT id FROM repair_records", limit=1).rows] == [1]
    assert not tool.query("SELECT id FROM repair_records ORDER BY id LIMIT 1 OFFSET 1").truncated
    for bad in (0, -1, "1; DROP TABLE machines", 1.5, True):
        with pytest.raises(SqlQueryError, match="limit"):
            tool.query("SELECT id FROM repair_records", limit=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        fastrag.SqlTool(f"sqlite:///{sqlite_db}", tables=TABLES, max_rows=0)


def test_sqlite_time_limit(sqlite_db):
    tool = fastrag.SqlTool(f"sqlite:///{sqlite_db}", tables=TABLES, timeout=0.2)
    slow = (
        "SELECT COUNT(*) AS n FROM repair_records a JOIN repair_records b JOIN repair_records c "
        "JOIN repair_records d JOIN repair_records e JOIN repair_records f JOIN repair_records g "
        "JOIN repair_records h JOIN repair_records i JOIN repair_records j JOIN repair_records k "
        "JOIN repair_records l JOIN repair_records m JOIN repair_records n JOIN repair_records o"
    )
    t0 = time.monotonic()
    with pytest.raises(SqlQueryError, match="longer than"):
        tool.query(slow)
    assert time.monotonic() - t0 < 60  # interrupted, not run to the end (hours)


@pytest.mark.parametrize("sql", REFUSED)
def test_sqlite_refuses_writes_and_disallowed_reads(sqlite_db, sql):
    before = _sqlite_state(sqlite_db)
    tool = fastrag.SqlTool(f"sqlite:///{sqlite_db}", tables=TABLES)
    with pytest.raises(SqlQueryError):
        tool.query(sql)
    assert _sqlite_state(sqlite_db) == before
    assert not Path("/tmp/fastrag-evil.db").exists()


def test_sqlite_values_are_always_bound(sqlite_db):
    before = _sqlite_state(sqlite_db)
    tool = fastrag.SqlTool(f"sqlite:///{sqlite_db}", tables=TABLES)
    q = "SELECT id FROM repair_records WHERE fault_code = :code"
    for value in (
        "x' OR '1'='1",
        "SV0432'; DROP TABLE repair_records; --",
        "'); ATTACH DATABASE '/tmp/fastrag-evil.db' AS e; --",
        ":code",
        "%s",
    ):
        assert tool.query(q, {"code": value}).rows == []
    assert [r["id"] for r in tool.query(q, {"code": "SV0432"}).rows] == [1, 2]
    for params in (
        {"code": ["SV0432"]},
        {"code": {"a": 1}},
        {"code": b"SV0432"},
        {"code": "SV0432", "extra": 1},
        {},
        {"code) OR (1": "x"},
    ):
        with pytest.raises(SqlQueryError):
            tool.query(q, params)
    assert _sqlite_state(sqlite_db) == before


def test_sqlite_connection_is_read_only_below_the_validator(sqlite_db):
    """The authorizer and mode=ro refuse a write even if validation were bypassed."""
    before = _sqlite_state(sqlite_db)
    tool = fastrag.SqlTool(f"sqlite:///{sqlite_db}", tables=TABLES)
    for sql in (
        "DELETE FROM repair_records",
        "UPDATE repair_records SET solution_text = 'x'",
        "ATTACH DATABASE '/tmp/fastrag-evil.db' AS e",
        "SELECT secret FROM repair_records",
        "SELECT name FROM staff",
    ):
        with pytest.raises(SqlQueryError):
            tool._run_sqlite(sql, {}, 10)
    assert _sqlite_state(sqlite_db) == before


def test_configuration_is_validated(sqlite_db):
    url = f"sqlite:///{sqlite_db}"
    for tables in ({}, {"a b": ["id"]}, {"t": []}, {"t": "id"}, {"t": ["id;"]}):
        with pytest.raises(ConfigError):
            fastrag.SqlTool(url, tables=tables)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        fastrag.SqlTool(url, tables=TABLES, keys={"machines": "model2"})
    assert parse_sql_tables(["repair_records=id,fault_code", "machines=id"]) == {
        "repair_records": ["id", "fault_code"],
        "machines": ["id"],
    }
    with pytest.raises(ConfigError):
        parse_sql_tables(["repair_records"])
    with pytest.raises(ConfigError):
        ServeSettings(kbs=(("a", "/x"),), sql=url)


# -- PostgreSQL ---------------------------------------------------------------------------


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL cluster: (URL of a read-only role, superuser connect function)."""
    psycopg = pytest.importorskip("psycopg")
    bin_dir = _pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries are not installed (Debian: postgresql-15)")
    as_user: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: postgres refuses to run as root")
        as_user = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="fastrag-pg-"))
    data = root / "data"
    if as_user:
        shutil.chown(root, "postgres")
    port = _free_port()

    def run(*cmd: str) -> None:
        subprocess.run([*as_user, *cmd], check=True, capture_output=True, timeout=120)

    run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
    run(
        str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-t", "60",
        "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "start",
    )  # fmt: skip
    try:
        admin = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE ROLE reader LOGIN")
            conn.execute(SCHEMA[0].replace("INTEGER PRIMARY KEY", "INTEGER PRIMARY KEY"))
            conn.execute(SCHEMA[1])
            conn.execute(SCHEMA[2])
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO repair_records VALUES (%s, %s, %s, %s, %s)", ROWS)
                cur.executemany("INSERT INTO machines VALUES (%s, %s)", MACHINES)
            conn.execute("INSERT INTO staff VALUES (1, 'Alice')")
            # The role could write: only the tool's read-only transaction stops it.
            conn.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public "
                         "TO reader")  # fmt: skip
            conn.execute("GRANT CREATE ON SCHEMA public TO reader")

        def state():
            with psycopg.connect(admin) as conn:
                out = {}
                for t in ("repair_records", "machines", "staff"):
                    out[t] = conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                out["tables"] = conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
                ).fetchall()
                return out

        yield f"postgresql+psycopg://reader@127.0.0.1:{port}/postgres", state
    finally:
        subprocess.run(
            [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True, timeout=60,
        )  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


def test_postgres_rows_and_citations(postgres):
    url, _ = postgres
    tool = fastrag.SqlTool(url, tables=TABLES)
    result = tool.query(
        "SELECT solution_text FROM repair_records WHERE fault_code = :code ORDER BY id",
        {"code": "SV0432"},
    )
    assert result.rows == [
        {"solution_text": "Replace the spindle fan"},
        {"solution_text": "Clean the amplifier filter"},
    ]
    assert [c.key for c in result.citations] == [{"id": 1}, {"id": 2}]
    assert result.citations[0].source == url
    like = tool.query(
        "SELECT id FROM repair_records WHERE solution_text LIKE '%fan%' AND fault_code = :c",
        {"c": "SV0432"},
    )
    assert [r["id"] for r in like.rows] == [1]
    tool.close()


def test_postgres_time_limit(postgres):
    url, _ = postgres
    tool = fastrag.SqlTool(url, tables=TABLES, timeout=0.3)
    slow = (
        "SELECT COUNT(*) AS n FROM repair_records a, repair_records b, repair_records c, "
        "repair_records d, repair_records e, repair_records f, repair_records g, "
        "repair_records h, repair_records i, repair_records j, repair_records k, "
        "repair_records l, repair_records m, repair_records n, repair_records o, "
        "repair_records p, repair_records q, repair_records r, repair_records s"
    )
    with pytest.raises(SqlQueryError, match="statement timeout"):
        tool.query(slow)
    tool.close()


@pytest.mark.parametrize("sql", REFUSED)
def test_postgres_refuses_writes_and_disallowed_reads(postgres, sql):
    url, state = postgres
    before = state()
    tool = fastrag.SqlTool(url, tables=TABLES)
    with pytest.raises(SqlQueryError):
        tool.query(sql)
    assert state() == before
    tool.close()


def test_postgres_values_bound_and_transaction_read_only_below_the_validator(postgres):
    url, state = postgres
    before = state()
    tool = fastrag.SqlTool(url, tables=TABLES)
    q = "SELECT id FROM repair_records WHERE fault_code = :code"
    for value in ("x' OR '1'='1", "SV0432'; DROP TABLE repair_records; --", "%(code)s", "%s"):
        assert tool.query(q, {"code": value}).rows == []
    for sql in (
        "DELETE FROM repair_records",
        "INSERT INTO staff VALUES (2, 'Mallory')",
        "CREATE TABLE evil (id int)",
        "SET default_transaction_read_only = off",
    ):
        with contextlib.suppress(SqlQueryError):
            tool._run_sqlalchemy(sql, {}, 10)
    # A write a bypassed validator would send is refused by the read-only transaction.
    with pytest.raises(SqlQueryError, match="read-only transaction"):
        tool._run_sqlalchemy("DELETE FROM repair_records", {}, 10)
    assert state() == before
    tool.close()


# -- over HTTP and MCP --------------------------------------------------------------------


@pytest.fixture
def sql_server(sqlite_db, tmp_path):
    kb = save_kb([{"id": "a", "text": "Alarm SV0432: see the repair records."}], tmp_path / "kb")
    settings = ServeSettings(
        kbs=(("fanuc", str(kb)),), reload_interval=0, sql=f"sqlite:///{sqlite_db}",
        sql_tables=TABLES,
    )  # fmt: skip
    with ThreadServer(settings) as s:
        yield s


def test_http_and_mcp_sql_tool(sql_server, sqlite_db):
    before = _sqlite_state(sqlite_db)
    with httpx.Client(base_url=sql_server.url, timeout=30) as http:
        r = http.post(
            "/v1/sql",
            json={
                "sql": "SELECT solution_text FROM repair_records WHERE fault_code = :code",
                "params": {"code": "SV0432"},
            },
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["columns"] == ["solution_text"] and len(body["rows"]) == 2
        assert body["citations"][0]["table"] == "repair_records"
        assert body["citations"][0]["key"] == {"id": 1}
        for sql in ("DELETE FROM repair_records", "SELECT secret FROM repair_records"):
            r = http.post("/v1/sql", json={"sql": sql})
            assert r.status_code == 400 and r.json()["error"]["type"] == "sql_refused"
        r = http.post("/v1/sql", json={"sql": "SELECT id FROM machines", "limit": "1; DROP"})
        assert r.status_code == 400
        r = http.post("/v1/sql", json={"sql": "SELECT id FROM machines", "params": {"a": [1]}})
        assert r.status_code == 400

    async def run():
        async with contextlib.AsyncExitStack() as stack:
            http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
            c = await stack.enter_async_context(
                Client(streamable_http_client(sql_server.url + "/mcp", http_client=http))
            )
            names = {t.name for t in (await c.list_tools()).tools}
            ok = await c.call_tool(
                "sql_query",
                {
                    "sql": "SELECT model FROM machines WHERE id = :m",
                    "params": {"m": "M1"},
                    "limit": 5,
                },
            )
            bad = await c.call_tool("sql_query", {"sql": "DROP TABLE machines"})
            return names, ok, bad

    names, ok, bad = anyio.run(run)
    assert "sql_query" in names
    body = json.loads(ok.content[0].text)
    assert body["rows"] == [{"model": "FANUC-0iMD"}]
    assert body["citations"] == [
        {"source": f"sqlite:///{sqlite_db}", "table": "machines", "key": {"id": "M1"}}
    ]
    assert bad.is_error and "only SELECT" in bad.content[0].text
    assert _sqlite_state(sqlite_db) == before


def test_http_without_a_sql_source_is_404(tmp_path):
    kb = save_kb([{"id": "a", "text": "Nothing here."}], tmp_path / "kb")
    with ThreadServer(ServeSettings(kbs=(("a", str(kb)),), reload_interval=0)) as s:
        r = httpx.post(s.url + "/v1/sql", json={"sql": "SELECT 1"}, timeout=30)
    assert r.status_code == 404


# -- rows cited in answers ----------------------------------------------------------------

MANUAL = [
    {"id": "manual", "text": "Alarm SV0432 means the spindle overheats. See the repair records."},
    {"id": "belt", "text": "The conveyor belt is cleaned every Friday."},
]
SV0432 = "SELECT fault_code, solution_text FROM repair_records WHERE fault_code = :code ORDER BY id"


def _answer_from_rows(url):
    tool = fastrag.SqlTool(url, tables=TABLES)
    try:
        result = tool.query(SV0432, {"code": "SV0432"})
    finally:
        tool.close()
    rows = result.hits()
    assert [h.doc_id for h in rows] == ["sql:repair_records#1", "sql:repair_records#2"]
    assert rows[0].text == "fault_code: SV0432 | solution_text: Replace the spindle fan"
    assert rows[0].metadata["source"] == "sql:repair_records#1"
    assert rows[0].metadata["row"] == {
        "fault_code": "SV0432",
        "solution_text": "Replace the spindle fan",
    }
    assert rows[0].metadata["key"] == {"id": 1} and rows[0].metadata["table"] == "repair_records"
    assert rows[0].metadata["database"] == tool.source and rows[0].chunk_id < 0
    assert result.hits()[0].chunk_id == rows[0].chunk_id  # stable: a row is cited the same way
    kb = fastrag.KnowledgeBase.build(MANUAL)
    answer = kb.answer("What is the solution for SV0432?", rows=result)
    assert [h.doc_id for h in answer.hits[:2]] == ["sql:repair_records#1", "sql:repair_records#2"]
    assert "manual" in [h.doc_id for h in answer.hits]  # the chunks stay beside the rows
    assert answer.found and "Replace the spindle fan" in answer.text
    cited = [h.doc_id for h in answer.citations.values()]
    assert "sql:repair_records#1" in cited
    assert fastrag.answer.audit.verify_answer(answer)
    as_json = answer.to_dict()
    assert as_json["hits"][0]["metadata"]["source"] == "sql:repair_records#1"
    return answer


def test_sqlite_rows_are_cited_in_answers_beside_chunks(sqlite_db):
    _answer_from_rows(f"sqlite:///{sqlite_db}")


def test_postgres_rows_are_cited_in_answers_beside_chunks(postgres):
    url, _ = postgres
    answer = _answer_from_rows(url)
    assert answer.hits[0].metadata["database"] == url


def test_joined_and_aggregate_rows_are_cited_by_their_tables(sqlite_db):
    tool = fastrag.SqlTool(f"sqlite:///{sqlite_db}", tables=TABLES)
    joined = tool.query(
        "SELECT r.fault_code, r.solution_text, m.model FROM repair_records r JOIN machines m "
        "ON r.machine_id = m.id WHERE r.fault_code = :code ORDER BY r.id",
        {"code": "SV0432"},
    )
    hits = joined.hits()
    assert [h.doc_id for h in hits] == [
        "sql:repair_records#1+machines#M1",
        "sql:repair_records#2+machines#M2",
    ]
    assert hits[0].text == (
        "fault_code: SV0432 | solution_text: Replace the spindle fan | model: FANUC-0iMD"
    )
    assert [c["table"] for c in hits[0].metadata["citations"]] == ["repair_records", "machines"]
    count = tool.query(
        "SELECT COUNT(*) AS n FROM repair_records WHERE fault_code = :code", {"code": "SV0432"}
    )
    (row,) = count.hits()
    assert row.doc_id == "sql:repair_records#row=1" and row.text == "n: 2"
    assert row.metadata["key"] is None
    kb = fastrag.KnowledgeBase.build(MANUAL)
    with pytest.raises(ConfigError, match="rows must be SqlTool query results"):
        kb.answer("SV0432?", rows=[{"fault_code": "SV0432"}])
    # The same row given twice is one context entry; a stream shows the rows first too.
    events = list(kb.answer_stream("Which machine model had SV0432?", rows=[joined, joined]))
    shown = [h.doc_id for h in events[0].hits]
    assert shown[:2] == [h.doc_id for h in hits] and shown.count(hits[0].doc_id) == 1
    final = events[-1].answer
    assert final is not None and final.found and "FANUC-0iMD" in final.text
    assert final.citations[1].doc_id == "sql:repair_records#1+machines#M1"


def test_rows_are_redacted_before_a_model_reads_them(tmp_path):
    path = tmp_path / "contacts.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE repair_records (id INTEGER PRIMARY KEY, fault_code TEXT, "
                 "solution_text TEXT)")  # fmt: skip
    conn.execute(
        "INSERT INTO repair_records VALUES (1, 'SV0432', 'Call tech.lee@example.com to swap the fan')"
    )
    conn.commit()
    conn.close()
    tool = fastrag.SqlTool(
        f"sqlite:///{path}", tables={"repair_records": ["id", "fault_code", "solution_text"]}
    )
    result = tool.query(SV0432, {"code": "SV0432"})
    seen: list[str] = []

    def model(question, hits):  # any callable generator is model-bound: it reads redacted text
        seen.extend(h.text for h in hits)
        return "Swap the fan [1]."

    kb = fastrag.KnowledgeBase.build(MANUAL)
    answer = kb.answer("What is the fix for SV0432?", rows=result, generator=model)
    assert seen and "tech.lee@example.com" not in seen[0] and "Call" in seen[0]
    assert "tech.lee@example.com" not in answer.prompt
    assert answer.pii.get("EMAIL") == 1
    assert answer.citations[1].doc_id == "sql:repair_records#1"
    assert "tech.lee@example.com" in answer.citations[1].text  # the caller's own copy is whole


# -- rows cited from every way in: answer_batch, HTTP, MCP, CLI ----------------------------

ASK = "What is the solution for SV0432?"


def test_answer_batch_cites_rows_per_question_and_for_all(sqlite_db):
    tool = fastrag.SqlTool(f"sqlite:///{sqlite_db}", tables=TABLES)
    sv = tool.query(SV0432, {"code": "SV0432"})
    ot = tool.query(SV0432, {"code": "OT0500"})
    tool.close()
    kb = fastrag.KnowledgeBase.build(MANUAL)
    # One result for every question.
    both = kb.answer_batch([ASK, "Which rows cite SV0432?"], rows=sv, output="answers")
    for ans in both:
        assert [h.doc_id for h in ans.hits[:2]] == ["sql:repair_records#1", "sql:repair_records#2"]
    # One entry per question; the same question with other rows is answered apart.
    got = kb.answer_batch([ASK, ASK, ASK], rows=[sv, ot, None], output="answers")
    assert got[0].hits[0].doc_id == "sql:repair_records#1"
    assert got[1].hits[0].doc_id == "sql:repair_records#3"
    assert [h.doc_id for h in got[1].hits if h.doc_id.startswith("sql:")] == [
        "sql:repair_records#3"
    ]
    assert not any(h.doc_id.startswith("sql:") for h in got[2].hits)
    assert any(h.doc_id.startswith("sql:") for h in got[0].citations.values())
    table = kb.answer_batch([ASK, ASK], rows=[ot, sv])
    assert table.num_rows == 2
    with pytest.raises(ConfigError, match="rows has 1 entries for 2 questions"):
        kb.answer_batch([ASK, ASK], rows=[sv])
    with pytest.raises(ConfigError, match="rows must be SqlTool query results"):
        kb.answer_batch([ASK], rows=[{"fault_code": "SV0432"}])


def _sql_answers_over_http(url: str, db_state) -> None:
    """/v1/answer and /v1/answer/batch with an ``sql`` field, against a server on ``url``."""
    before = db_state()
    call = {"sql": SV0432, "params": {"code": "SV0432"}}
    with httpx.Client(base_url=url, timeout=30) as http:
        r = http.post("/v1/answer", json={"question": ASK, "sql": call})
        assert r.status_code == 200, r.text
        body = r.json()
        assert [h["doc_id"] for h in body["hits"][:2]] == [
            "sql:repair_records#1",
            "sql:repair_records#2",
        ]
        assert "manual" in [h["doc_id"] for h in body["hits"]]
        assert body["hits"][0]["metadata"]["row"] == {
            "fault_code": "SV0432",
            "solution_text": "Replace the spindle fan",
        }
        assert "Replace the spindle fan" in body["answer"]
        by_id = {h["chunk_id"]: h["doc_id"] for h in body["hits"]}
        assert "sql:repair_records#1" in [by_id[c] for c in body["citations"].values()]
        # A batch: one query per question (null for none), or one for all.
        other = {"sql": SV0432, "params": {"code": "OT0500"}}
        r = http.post(
            "/v1/answer/batch", json={"questions": [ASK, ASK, ASK], "sql": [call, other, None]}
        )
        assert r.status_code == 200, r.text
        res = r.json()["results"]
        assert res[0]["hits"][0]["doc_id"] == "sql:repair_records#1"
        assert res[1]["hits"][0]["doc_id"] == "sql:repair_records#3"
        assert not any(h["doc_id"].startswith("sql:") for h in res[2]["hits"])
        r = http.post("/v1/answer/batch", json={"questions": [ASK, "SV0432?"], "sql": call})
        assert [x["hits"][0]["doc_id"] for x in r.json()["results"]] == ["sql:repair_records#1"] * 2
        # Streamed, the rows are in the first (hits) event.
        with http.stream(
            "POST", "/v1/answer", json={"question": ASK, "sql": call, "stream": True}
        ) as s:
            text = "".join(s.iter_text())
        first = json.loads(text.split("data: ", 1)[1].split("\n", 1)[0])
        assert first["hits"][0]["doc_id"] == "sql:repair_records#1"
        # Refused: a write, a disallowed column, injection through the value and the limit,
        # rows given by value (never trusted), a list of the wrong length.
        for sql in ("DELETE FROM repair_records", "SELECT secret FROM repair_records"):
            r = http.post("/v1/answer", json={"question": ASK, "sql": {"sql": sql}})
            assert r.status_code == 400 and r.json()["error"]["type"] == "sql_refused", r.text
        r = http.post(
            "/v1/answer",
            json={"question": ASK, "sql": {**call, "params": {"code": "x' OR '1'='1"}}},
        )
        assert r.status_code == 200
        assert not any(h["doc_id"].startswith("sql:") for h in r.json()["hits"])
        r = http.post("/v1/answer", json={"question": ASK, "sql": {**call, "limit": "1; DROP"}})
        assert r.status_code == 400
        r = http.post(
            "/v1/answer",
            json={"question": ASK, "rows": [{"fault_code": "SV0432", "solution_text": "lies"}]},
        )
        assert r.status_code == 400 and r.json()["error"]["type"] == "unknown_option"
        r = http.post("/v1/answer/batch", json={"questions": [ASK, ASK], "sql": [call]})
        assert r.status_code == 400 and "2 questions" in r.json()["error"]["message"]
    assert db_state() == before


def test_http_answers_cite_sqlite_rows(manual_sql_server, sqlite_db):
    _sql_answers_over_http(manual_sql_server.url, lambda: _sqlite_state(sqlite_db))


def test_http_answers_cite_postgres_rows(postgres, tmp_path):
    url, state = postgres
    kb = save_kb(MANUAL, tmp_path / "kb")
    settings = ServeSettings(
        kbs=(("fanuc", str(kb)),), reload_interval=0, sql=url, sql_tables=TABLES
    )
    with ThreadServer(settings) as s:
        _sql_answers_over_http(s.url, state)


def test_http_answer_with_sql_on_a_server_without_one_is_404(tmp_path):
    kb = save_kb(MANUAL, tmp_path / "kb")
    with ThreadServer(ServeSettings(kbs=(("a", str(kb)),), reload_interval=0)) as s:
        r = httpx.post(
            s.url + "/v1/answer", json={"question": ASK, "sql": {"sql": "SELECT 1"}}, timeout=30
        )
    assert r.status_code == 404 and "no SQL source" in r.json()["error"]["message"]


@pytest.fixture
def manual_sql_server(sqlite_db, tmp_path):
    kb = save_kb(MANUAL, tmp_path / "kb")
    settings = ServeSettings(
        kbs=(("fanuc", str(kb)),), reload_interval=0, sql=f"sqlite:///{sqlite_db}",
        sql_tables=TABLES,
    )  # fmt: skip
    with ThreadServer(settings) as s:
        yield s


def test_mcp_answer_cites_rows(manual_sql_server, sqlite_db):
    before = _sqlite_state(sqlite_db)

    async def run():
        async with contextlib.AsyncExitStack() as stack:
            http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
            c = await stack.enter_async_context(
                Client(streamable_http_client(manual_sql_server.url + "/mcp", http_client=http))
            )
            ok = await c.call_tool(
                "answer", {"question": ASK, "sql": SV0432, "sql_params": {"code": "SV0432"}}
            )
            plain = await c.call_tool("answer", {"question": ASK})
            bad = await c.call_tool(
                "answer", {"question": ASK, "sql": "UPDATE repair_records SET fault_code = 'x'"}
            )
            orphan = await c.call_tool("answer", {"question": ASK, "sql_params": {"code": "x"}})
            return ok, plain, bad, orphan

    ok, plain, bad, orphan = anyio.run(run)
    body = json.loads(ok.content[0].text)
    assert [h["doc_id"] for h in body["hits"][:2]] == [
        "sql:repair_records#1",
        "sql:repair_records#2",
    ]
    assert "Replace the spindle fan" in body["answer"]
    assert not any(
        h["doc_id"].startswith("sql:") for h in json.loads(plain.content[0].text)["hits"]
    )
    assert bad.is_error and "only SELECT" in bad.content[0].text
    assert orphan.is_error and "need sql" in orphan.content[0].text
    assert _sqlite_state(sqlite_db) == before


def test_cli_ask_cites_rows(sqlite_db, tmp_path, capsys):
    from fastrag.cli import main

    kb = save_kb(MANUAL, tmp_path / "kb")
    before = _sqlite_state(sqlite_db)
    sql = [
        "--sql", f"sqlite:///{sqlite_db}", "--sql-tables",
        "repair_records=id,fault_code,machine_id,solution_text", "--sql-query", SV0432,
    ]  # fmt: skip
    assert main(["ask", ASK, "--kb", str(kb), *sql, "--sql-param", "code=SV0432", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert [h["doc_id"] for h in body["hits"][:2]] == [
        "sql:repair_records#1",
        "sql:repair_records#2",
    ]
    ot = "What is the solution for OT0500?"
    assert main(["ask", ot, "--kb", str(kb), *sql, "--sql-param", "code=OT0500"]) == 0
    out = capsys.readouterr().out
    assert "Reset the overtravel limit" in out and "[1] sql:repair_records#3\n" in out
    # Typed parameters (NAME:=JSON); a code that looks like a number stays text with NAME=.
    by_id = [*sql[:4], "--sql-query", "SELECT solution_text FROM repair_records WHERE id = :i"]
    assert main(["ask", ASK, "--kb", str(kb), *by_id, "--sql-param", "i:=2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"][0]["doc_id"] == "sql:repair_records#2"
    from fastrag.cli import parse_sql_params

    assert parse_sql_params(["code=0432", "n:=3", "x:=null"]) == {"code": "0432", "n": 3, "x": None}
    for bad in (["code"], ["=1"], ["n:=[1]"], ["n:=nope"]):
        with pytest.raises(ConfigError, match="--sql-param"):
            parse_sql_params(bad)
    # Refused: a write, a query without a database, a database without a query.
    assert main(["ask", ASK, "--kb", str(kb), *sql[:4], "--sql-query", "DROP TABLE machines"]) != 0
    assert main(["ask", ASK, "--kb", str(kb), "--sql-query", SV0432]) != 0
    assert main(["ask", ASK, "--kb", str(kb), *sql[:4]]) != 0
    err = capsys.readouterr().err
    assert "only SELECT" in err and "needs --sql URL" in err and "need --sql-query" in err
    assert _sqlite_state(sqlite_db) == before
