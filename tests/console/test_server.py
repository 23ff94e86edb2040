"""`cruxsql console` end to end over HTTP: a real store, the real CLI, a real Datasette process."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import sqlite3
import threading
import time

import apsw
import pytest
from click.testing import CliRunner

import cruxsql
from cruxsql.cli import main
from cruxsql.console import contract, launch
from cruxsql.governance import legal_holds, retention
from cruxsql.recall import freshness

from support.console import OLD_FACTS, cli, console_store, running_console  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("datasette") is None,
                                 reason="Datasette is not installed (pip install -e '.[test]' brings it)")]

TOKEN = "s3cret-operator-token-0123456789"


@pytest.fixture(scope="module")
def store_dir(console_store):
    return console_store


@pytest.fixture(scope="module")
def console(store_dir):
    with running_console(store_dir[0]) as c:
        yield c


def test_index_lists_documented_tables_and_canned_queries(console):
    status, body, _ = console.get("cruxsql.json")
    assert status == 200
    import json
    data = json.loads(body)
    visible = {t["name"] for t in data["tables"] if not t["hidden"]}
    hidden = {t["name"] for t in data["tables"] if t["hidden"]}
    assert {"facts", "journal_events", "journal_corrupt_lines", "document_chunks"} <= visible
    assert "recall_grams" in hidden and "journal_checkpoint" in hidden
    assert {v["name"] for v in data["views"]} == {r.name for r in contract.VIEW_RELATIONS if r.kind == "view"}
    assert [q["name"] for q in data["queries"]] == [
        "live_facts_of_tenant", "fact_history", "actor_writes", "retention_candidates", "active_legal_holds",
        "erasure_reports", "corrupt_journal_lines", "stale_facts", "token_usage_by_agent", "contradiction_candidates",
        "duplicate_candidates"]


def test_live_facts_of_a_tenant_and_one_facts_history(console, store_dir):
    _, ids = store_dir
    live = console.rows("cruxsql", "live_facts_of_tenant", tenant="acme")
    by_key = {(r["entity"], r["key"]): r["value"] for r in live}
    assert by_key[("svc", "owner")] == "carol"
    assert ("tmp", "scratch") not in by_key
    assert all(r["fact_id"] != ids["superseded"] for r in live)
    history = console.rows("cruxsql", "fact_history", fact_id=ids["head"])
    with cruxsql.open(store_dir[0]) as store:
        stored_on = dict(store.db.execute("SELECT fact_id, line_no FROM facts"))
    assert [(r["version"], r["value"], r["line_no"]) for r in history if r["op"] == "store"] == [
        (1, "alice", stored_on[OLD_FACTS[0]["fact_id"]]), (2, "bob", stored_on[ids["superseded"]]),
        (3, "carol", stored_on[ids["head"]])]
    assert {r["value"]: r["superseded_by"] for r in history} == {
        "alice": ids["superseded"], "bob": ids["head"], "carol": None}


def test_actor_writes_in_a_time_range(console):
    rows = console.rows("cruxsql", "actor_writes", actor="ops", since="2025-01-01", until="2025-01-04")
    assert [r["fact_id"] for r in rows] == [OLD_FACTS[0]["fact_id"]]
    rows = console.rows("cruxsql", "actor_writes", actor="ops", since="2025-01-01T00:00:00Z", until="")
    assert [r["value"] for r in rows] == ["alice", "eu-west-1", "gold"]


def test_retention_candidates_agree_with_the_retention_report(console, store_dir):
    rows = console.rows("cruxsql", "retention_candidates", days="30", tenant="")
    with cruxsql.open(store_dir[0]) as store:
        report = retention.classify(store, time.time_ns() - 30 * 86_400 * 10**9)
    expected = {i["fact_id"]: (i.get("reason"), ", ".join(i.get("hold_ids", [])) or None)
                for i in report.eligible + report.protected}
    assert {r["fact_id"]: (r["protected_by"], r["hold_ids"]) for r in rows} == expected
    reasons = {r["fact_id"]: r["protected_by"] for r in rows}
    assert reasons[OLD_FACTS[0]["fact_id"]] is None
    assert reasons[OLD_FACTS[1]["fact_id"]] == "legal hold"
    assert reasons[OLD_FACTS[2]["fact_id"]] == "private"
    assert reasons[OLD_FACTS[4]["fact_id"]] == "private"  # __ops:: is born-private as well as daemon-owned
    assert [r["fact_id"] for r in console.rows("cruxsql", "retention_candidates", days="30", tenant="globex")] == [
        OLD_FACTS[3]["fact_id"]]


def test_active_legal_holds_agree_with_governance(console, store_dir):
    rows = console.rows("cruxsql", "active_legal_holds")
    with cruxsql.open(store_dir[0]) as store:
        holds = legal_holds.active_holds(store.db)
    assert [(r["hold_id"], r["tenant_id"], r["entity_prefixes"], r["reason"], r["placed_by"], r["fail_closed"])
            for r in rows] == [(h.hold_id, "acme", '["user:"]', "litigation 17", "legal", 0) for h in holds]
    assert len(rows) == 1


def test_erasure_reports_chain_verifies(console):
    rows = console.rows("cruxsql", "erasure_reports")
    assert [r["reason"] for r in rows] == ["data-subject request 1", "data-subject request 2"]
    assert [(r["hash_ok"], r["chain_ok"], r["facts_erased"]) for r in rows] == [(1, 1, 2), (1, 1, 1)]  # the first also erased the deleted fact's content
    assert rows[0]["prev_report_hash"] is None and rows[1]["prev_report_hash"] == rows[0]["report_hash"]


def test_corrupt_lines_and_stale_facts(console, store_dir):
    corrupt = console.rows("cruxsql", "corrupt_journal_lines")
    assert len(corrupt) == 1 and corrupt[0]["reason"].startswith("invalid JSON")
    stale = console.rows("cruxsql", "stale_facts", horizon_class="")
    now_ms = time.time_ns() // 10**6
    with cruxsql.open(store_dir[0]) as store:
        expected = sorted(fid for fid, hc, at in store.db.execute(
            "SELECT fact_id, horizon_class, coalesce(reverified_at_ns, stored_at_ns) FROM live_facts")
            if freshness.freshness_at(hc, at // 10**6, now_ms) == freshness.STALE)
    assert sorted(r["fact_id"] for r in stale) == expected == [OLD_FACTS[3]["fact_id"]]
    assert [r["fact_id"] for r in console.rows("cruxsql", "stale_facts", horizon_class="volatile")] == [
        OLD_FACTS[3]["fact_id"]]


def test_the_console_cannot_write(console, tmp_path):
    status, body = console.sql("cruxsql", "DELETE FROM facts")
    assert status == 400 and "Statement must be a SELECT" in body["error"]
    # below Datasette's SELECT-only rule: every connection the plugin prepares refuses writes
    import sqlite3
    from cruxsql.console.plugin import ConsolePlugin
    conn = sqlite3.connect(tmp_path / "x.db")
    conn.execute("CREATE TABLE t (x)")
    ConsolePlugin({"cruxsql": "view"}, None).prepare_connection(conn, "cruxsql")
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):  # the sandbox of `cruxsql sql`
        conn.execute("INSERT INTO t VALUES (1)")
    assert conn.execute("SELECT cruxsql_blake3('abc')").fetchone() == (
        "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85",)


def test_new_writes_appear_without_restart_and_a_writer_never_waits(console, store_dir):
    data_dir, _ = store_dir
    cli(data_dir, "store", "svc", "pager", "dave", "--tenant", "acme")
    assert "dave" in [r["value"] for r in console.rows("cruxsql", "live_facts_of_tenant", tenant="acme")]
    # a slow console query holds a read snapshot of the view while a writer commits
    slow = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000000) "
            "SELECT (SELECT count(*) FROM facts) AS facts, count(*) AS steps FROM n")
    result = {}
    def read() -> None:
        try:
            result["r"] = console.sql("cruxsql", slow)
        except Exception as exc:  # reported by the assertion below, with what the console did
            result["error"] = repr(exc)

    reader = threading.Thread(target=read)
    with cruxsql.open(data_dir) as store:
        reader.start()
        time.sleep(0.15)
        started = time.perf_counter()
        store.store("svc", "pager", "erin", tenant="acme")
        waited = time.perf_counter() - started
    reader.join()
    assert "error" not in result, result["error"]
    assert result["r"][0] in (200, 400)  # finished, or stopped by Datasette's time limit: never blocking
    assert waited < 0.5, f"store() waited {waited:.3f} s behind a console reader"


def test_queries_stopped_or_refused_answer_400_and_print_nothing(console):
    """Datasette prints a failed request's traceback and locals through `rich` when it is importable:
    ~85 KB on the operator's terminal for each query the time limit stops, holding the SQL text."""
    before = len(console.output())
    slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) SELECT count(*) FROM n"
    status, body = console.sql("cruxsql", slow)
    assert status == 400 and "SQL query took too long" in body["error"]
    status, body = console.sql("cruxsql", "SELECT printf('%.*c', 2147483647, 'x')")  # refused in the function
    assert status == 400 and "raised exception" in body["error"]
    time.sleep(0.5)  # anything printed before the reply has reached the reader threads
    assert console.output()[before:] == ""


INTROSPECTION = ["versions", "plugins", "settings", "databases", "metadata", "threads", "actor"]


def test_datasettes_own_introspection_answers_and_nothing_prints_a_traceback(store_dir):
    with running_console(store_dir[0]) as c:
        pages = {name: c.get(f"-/{name}.json") for name in INTROSPECTION}
        assert {name: page[0] for name, page in pages.items()} == dict.fromkeys(INTROSPECTION, 200)
        sqlite = json.loads(pages["versions"][1])["sqlite"]
        assert sqlite["version"] and "ENABLE_FTS5" in sqlite["compile_options"]
        assert sqlite["fts_versions"] == []  # its probe creates a table: query_only refuses that write
        refused = {sql: c.sql("cruxsql", sql) for sql in ("SELECT load_extension('x')", "SELECT fts3_tokenizer('simple')")}
        assert {sql: status for sql, (status, _) in refused.items()} == dict.fromkeys(refused, 400)
        assert all("not authorized" in body["error"] for _, body in refused.values())
        c.proc.send_signal(signal.SIGTERM)
        c.proc.wait(timeout=20)
    assert "Traceback" not in c.output_at_exit()


def test_an_unexpected_error_is_datasettes_error_page_and_one_line_on_stderr(capsys):
    from datasette.app import Datasette
    from datasette.utils.asgi import Request
    from cruxsql.console.plugin import ConsolePlugin

    async def answer():
        request = Request.fake("/-/versions.json?sql=secret")
        try:
            raise sqlite3.DatabaseError("not authorized")
        except sqlite3.DatabaseError as exc:
            return await ConsolePlugin({}, None).handle_exception(Datasette(), request, exc)()

    response = asyncio.run(answer())
    assert response.status == 500
    assert json.loads(response.body) == {"ok": False, "error": "not authorized", "status": 500, "title": None}
    out, err = capsys.readouterr()
    assert (out, err) == ("", "cruxsql console: GET /-/versions.json failed: DatabaseError: not authorized\n")


def test_canned_queries_for_other_features_appear_when_their_tables_do(tmp_path):
    data_dir = tmp_path / "data"
    with cruxsql.open(data_dir) as store:
        store.store("svc", "owner", "alice")
    with running_console(data_dir) as c:
        import json
        names = lambda: [q["name"] for q in json.loads(c.get("cruxsql.json")[1])["queries"]]  # noqa: E731
        assert c.rows("cruxsql", "token_usage_by_agent") == []     # the MCP server's table (migration 0008)
        db = apsw.Connection(str(data_dir / "cruxsql.db"))
        db.setbusytimeout(5000)
        db.execute("INSERT INTO token_usage (agent, day, calls, tokens_in, tokens_out) "
                   "VALUES ('claude', '2026-11-30', 3, 10, 200)")
        db.close()
        assert names()[-3:] == ["token_usage_by_agent", "contradiction_candidates", "duplicate_candidates"]
        assert c.rows("cruxsql", "token_usage_by_agent") == [
            {"agent": "claude", "calls": 3, "tokens_in": 10, "tokens_out": 200}]
    assert c.proc.returncode == 0  # SIGTERM stops the console and its server process cleanly


def test_a_token_guards_every_page(store_dir):
    with running_console(store_dir[0], "--token", TOKEN) as c:
        assert c.get("")[0] == 403
        assert c.get("cruxsql/facts.json")[0] == 403
        assert c.get("-/dashboards/memory")[0] == 403
        assert c.get("cruxsql.json", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
        assert c.get("cruxsql.json", {"Authorization": "Bearer wrong-token-0123456789"})[0] == 403
        assert c.get("-/login?token=wrong")[0] == 403
        status, _, headers = c.get(f"-/login?token={TOKEN}")
        assert status == 302
        cookie = headers["set-cookie"].split(";")[0]
        assert cookie.startswith("ds_actor=")
        assert c.get("cruxsql.json", {"Cookie": cookie})[0] == 200


def test_audit_export_opens_with_its_own_metadata_and_chain_check(store_dir, tmp_path):
    data_dir, _ = store_dir
    audit = tmp_path / "audit.db"
    cli(data_dir, "export", "audit", "--tenant", "acme", "--format", "sqlite", "--output", str(audit))
    with running_console(None, "--audit", str(audit), "--no-view") as c:
        import json
        status, body, _ = c.get("audit.json")
        data = json.loads(body)
        assert status == 200 and data["database"] == "audit"
        assert {t["name"] for t in data["tables"]} == {"events", "facts", "event_facts", "export_info"}
        assert [q["name"] for q in data["queries"]] == ["fact_history", "hash_chain"]
        assert c.get("cruxsql.json")[0] == 404
        chain = c.rows("audit", "hash_chain")
        assert len(chain) > 5 and all(r["chain_ok"] == 1 for r in chain)
        db = apsw.Connection(str(audit))
        db.execute("UPDATE events SET line_blake3 = 'tampered' WHERE line_no = ?", (chain[2]["line_no"],))
        db.close()
        assert [r["chain_ok"] for r in c.rows("audit", "hash_chain")][1:4] == [1, 0, 1]


@pytest.mark.parametrize("args, message", [
    (["--host", "0.0.0.0"], "Error: --host 0.0.0.0 is not a loopback address"),
    (["--host", "10.1.2.3"], "Error: --host 10.1.2.3 is not a loopback address"),
    (["--host", "127.0.0.1", "--token", "short"], "Error: --token is 5 characters long; use at least 16"),
    (["--audit", "nope.db", "--no-view"], "Error: --audit 'nope.db' is not a file"),
    (["--no-view"], "Error: --no-view needs --audit"),
    (["--port", "70000"], "Error: --port 70000 is not a TCP port"),
    (["--data-dir", "/nonexistent/cruxsql"], "Error: no cruxsql store at /nonexistent/cruxsql"),
])
def test_refusals_are_one_line_errors(tmp_path, args, message):
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "owner", "alice")
    result = CliRunner().invoke(main, ["console", "--data-dir", str(tmp_path), *args])
    assert result.exit_code == 1
    assert result.output.startswith(message) and result.output.count("\n") == 1, result.output


def test_an_exposed_host_is_refused_by_the_real_command(tmp_path):
    result = cli(tmp_path, "console", "--host", "0.0.0.0", check=False)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == ("Error: --host 0.0.0.0 is not a loopback address and the view holds every tenant's "
                             "and every agent's facts, private ones included: pass --token (or "
                             "CRUXSQL_CONSOLE_TOKEN) to require it\n")


def test_not_an_audit_export(tmp_path):
    other = tmp_path / "other.db"
    db = apsw.Connection(str(other))
    db.execute("CREATE TABLE t (x)")
    db.close()
    result = CliRunner().invoke(main, ["console", "--audit", str(other), "--no-view"])
    assert result.exit_code == 1
    assert result.output == (f"Error: --audit '{other}' is not a cruxsql audit export "
                             "(`cruxsql export audit --format sqlite` writes one)\n")


def test_missing_extra_names_it(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "REQUIRED_MODULES", ("datasette", "cruxsql_no_such_module"))
    result = CliRunner().invoke(main, ["console", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output == ("Error: the console needs Datasette and datasette-dashboards (cruxsql_no_such_module "
                             "not installed): pip install 'cruxsql[console]'\n")


def test_a_token_lets_a_non_loopback_host_through_the_checks(tmp_path):
    launch.check_request(launch.ConsoleRequest(tmp_path, host="0.0.0.0", token=TOKEN))
    assert launch.is_loopback("::1") and launch.is_loopback("localhost") and launch.is_loopback("127.0.0.2")
    assert not launch.is_loopback("192.168.1.5") and not launch.is_loopback("example.org")


REFERENCE_CHARTS = {  # the plain GROUP BY each dashboard query replaces with index range counts
    "stored-per-day": """SELECT date(stored_at_ns / 1000000000, 'unixepoch') AS day, tenant_hash, count(*) FROM facts
        WHERE stored_at_ns >= ({now} / 86400000000000 - :days + 1) * 86400000000000 GROUP BY 1, 2 ORDER BY 1, 2""",
    "fact-states": """SELECT 'live', count(*) FROM facts WHERE deleted = 0 AND superseded_by IS NULL
        UNION ALL SELECT 'deleted', count(*) FROM facts WHERE deleted = 1
        UNION ALL SELECT 'superseded', count(*) FROM facts WHERE deleted = 0 AND superseded_by IS NOT NULL""",
    "events-by-op": """SELECT substr(event_at, 1, 10), op, count(*) FROM journal_events
        WHERE event_at >= date(({now} / 86400000000000 - :days + 1) * 86400, 'unixepoch') GROUP BY 1, 2 ORDER BY 1, 2""",
}


@pytest.mark.parametrize("days", ["1", "700"])
def test_dashboard_range_counts_equal_a_plain_group_by(store_dir, days):
    from cruxsql.console.canned import NOW_NS
    from cruxsql.console.dashboards import DASHBOARD, dashboards
    from cruxsql.recall.freshness import DecayPolicy

    charts = dashboards("cruxsql", DecayPolicy())[DASHBOARD]["charts"]
    with cruxsql.open(store_dir[0]) as store:
        db = store.db
        for name, reference in REFERENCE_CHARTS.items():
            params = {"days": days} if ":days" in charts[name]["query"] else {}
            got = [tuple(r) for r in db.execute(charts[name]["query"], params)]
            want = [tuple(r) for r in db.execute(reference.format(now=NOW_NS), params)
                    if r[-1] or name == "fact-states"]  # range counts leave out empty (day, tenant/op) pairs
            assert got == want and got, name
        ages = {(c, a, f): n for c, a, f, n in db.execute(charts["age-by-horizon"]["query"])}
        assert sum(ages.values()) == db.execute("SELECT count(*) FROM live_facts").fetchone()[0]
        assert ages[("volatile", "7 ≥ 1 year", "stale")] == 1  # the globex region, stored 2025-01-04
        growth = [r[1] for r in db.execute(charts["journal-growth"]["query"], {"days": days})]
        kept = db.execute("SELECT total(byte_length) FROM journal_events WHERE event_at IS NOT NULL").fetchone()[0]
        assert growth[-1] == kept and growth == sorted(growth)


def test_a_read_only_data_directory_is_refused(tmp_path):
    import subprocess
    with cruxsql.open(tmp_path / "src") as store:
        store.store("svc", "owner", "alice")
    ro = tmp_path / "ro"
    ro.mkdir()
    done = subprocess.run(["mount", "-o", "bind,ro", str(tmp_path / "src"), str(ro)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot make a read-only bind mount here: {done.stderr.strip()}")
    try:
        result = cli(ro, "console", "--port", "0", check=False)
    finally:
        subprocess.run(["umount", str(ro)], check=True)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == (f"Error: {ro} cannot be written, so its cruxsql.db cannot be caught up "
                                              "for the console to serve (`cruxsql sql` reads such a store)")
