"""The retention commands against a real temporary data directory."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cruxsql.facts.store import Store
from cruxsql.governance import erasure_proof
from support.journal_files import journal_bytes


def _seed(data_dir):
    with Store(data_dir) as store:
        keep = store.store("user:keep", "name", "CLI_KEEP_MARKER Alice")
        gone = store.store("user:gone", "name", "CLI_GONE_MARKER Bob")
        store.store("user:gone", "email", "CLI_GONE_MARKER_2 bob@example.com", tenant="acme")
        return keep, gone


def test_erase_prints_report_and_verify_passes(tmp_path, cli):
    keep, gone = _seed(tmp_path)
    result = cli("erase", "--data-dir", str(tmp_path), "--entity-prefix", "user:gone", "--tenant", "default",
                 "--reason", "DSR 1", "--actor", "dpo", "--request-id", "dsr-1", "--json")
    report = json.loads(result.stdout)
    assert report["request_id"] == "dsr-1" and report["actor"] == "dpo" and report["reason"] == "DSR 1"
    assert [e["fact_id"] for e in report["erased_facts"]] == [gone.fact_id]
    assert report["verification"]["ok"] is True
    data = journal_bytes(tmp_path)
    assert b"CLI_GONE_MARKER Bob" not in data and b"CLI_GONE_MARKER_2" in data and b"CLI_KEEP_MARKER" in data
    with Store(tmp_path) as store:
        assert erasure_proof.verify_erasure(store)["ok"]
    bad = cli("erase", "--data-dir", str(tmp_path), "--reason", "x", ok=False)
    assert bad.exit_code == 1 and "say which tenant(s): --tenant T, or --all-tenants" in bad.output
    bad = cli("erase", "--data-dir", str(tmp_path), "--all-tenants", "--reason", "x", ok=False)
    assert bad.exit_code == 1 and "--all-tenants alone would erase every fact" in bad.output
    bad = cli("erase", "--data-dir", str(tmp_path), "--tenant", "acme", "--all-tenants", "--reason", "x", ok=False)
    assert bad.exit_code == 1 and "exclude each other" in bad.output
    bad = cli("erase", "--data-dir", str(tmp_path), "--all-tenants", "--older-than", "soon", "--reason", "x",
              ok=False)
    assert bad.exit_code == 1 and "invalid cutoff 'soon'" in bad.output


def test_compact_json_and_text(tmp_path, cli):
    keep, gone = _seed(tmp_path)
    with Store(tmp_path) as store:
        store.delete(gone.fact_id)
    report = json.loads(cli("compact", "--data-dir", str(tmp_path), "--json").output)
    assert (report["facts_dropped"], report["facts_retained"], report["tombstones_kept"]) == (1, 2, 1)
    assert report["bytes_after"] < report["bytes_before"]
    text = cli("compact", "--data-dir", str(tmp_path)).output
    assert "facts_retained           2" in text and "bytes_after" in text


def test_hold_place_list_release_and_compaction_guard(tmp_path, cli):
    keep, gone = _seed(tmp_path)
    placed = json.loads(cli("hold", "place", "--data-dir", str(tmp_path), "--tenant", "default",
                            "--entity-prefix", "user:", "--reason", "litigation", "--actor", "counsel",
                            "--json").stdout)
    hold_id = placed["hold"]["hold_id"]
    assert placed["receipt"]["kind"] == "legal_hold_placed" and placed["hold"]["entity_prefixes"] == ["user:"]
    listed = json.loads(cli("hold", "list", "--data-dir", str(tmp_path), "--json").output)
    assert [(h["hold_id"], h["active"]) for h in listed] == [(hold_id, True)]
    table = cli("hold", "list", "--data-dir", str(tmp_path)).output
    assert hold_id in table and "litigation" in table

    # erase holds the fact back (exit 3, nothing changes); compaction is refused once a held fact is deleted
    journal = journal_bytes(tmp_path)
    held = cli("erase", "--data-dir", str(tmp_path), "--all-tenants", "--fact-id", gone.fact_id, "--reason", "x",
               ok=False)
    assert held.exit_code == 3 and held.output.splitlines()[0] == (
        f"held back by legal hold(s) {hold_id}: 1 matching fact(s) kept; nothing erased, the journal is unchanged")
    held = cli("erase", "--data-dir", str(tmp_path), "--all-tenants", "--fact-id", gone.fact_id, "--reason", "x",
               "--json", ok=False)
    report = json.loads(held.stdout)
    assert held.exit_code == 3 and report["outcome"] == "held_back" and report["holds_blocking"] == [hold_id]
    assert report["held_back"] == [{"fact_id": gone.fact_id, "hold_ids": [hold_id]}]
    assert journal_bytes(tmp_path) == journal
    with Store(tmp_path) as store:
        store.delete(gone.fact_id)
    refused = cli("compact", "--data-dir", str(tmp_path), ok=False)
    assert refused.exit_code == 1 and f"hard erasure blocked by active legal hold(s): {hold_id}" in refused.output
    assert gone.fact_id in refused.output

    receipt = cli("hold", "override-receipt", "--data-dir", str(tmp_path), "--reason", "court order").output
    receipt_obj = json.loads(receipt)
    assert receipt_obj["kind"] == "legal_hold_overridden" and receipt_obj["fact_ids"] == [gone.fact_id]
    partial = dict(receipt_obj, fact_ids=[])
    (tmp_path.parent / "partial.json").write_text(json.dumps(partial))
    refused = cli("compact", "--data-dir", str(tmp_path), "--override-receipt", str(tmp_path.parent / "partial.json"),
                  ok=False)
    assert "does not cover every blocked fact and hold" in refused.output
    (tmp_path.parent / "receipt.json").write_text(receipt)
    done = json.loads(cli("compact", "--data-dir", str(tmp_path), "--json", "--override-receipt",
                          str(tmp_path.parent / "receipt.json")).output)
    assert done["override_receipt_id"] == receipt_obj["receipt_id"] and done["facts_dropped"] == 1

    released = json.loads(cli("hold", "release", "--data-dir", str(tmp_path), hold_id, "--actor", "judge",
                              "--json").stdout)
    assert released["hold"]["active"] is False and released["receipt"]["kind"] == "legal_hold_released"
    assert json.loads(cli("hold", "list", "--data-dir", str(tmp_path), "--active", "--json").output) == []
    again = cli("hold", "release", "--data-dir", str(tmp_path), hold_id, ok=False)
    assert again.exit_code == 1 and "already released" in again.output


def test_retention_report_and_apply(tmp_path, cli):
    _seed(tmp_path)
    text = cli("retention", "report", "--data-dir", str(tmp_path), "--older-than", "0s").output
    assert "eligible               3 facts" in text
    report = json.loads(cli("retention", "report", "--data-dir", str(tmp_path), "--older-than", "90d", "--json").output)
    assert report["counts"]["eligible"] == 0 and report["eligible"] == []
    journal = journal_bytes(tmp_path)
    nothing = cli("retention", "apply", "--data-dir", str(tmp_path), "--all-tenants", "--older-than", "90d")
    assert nothing.output == "nothing matched the selection: nothing erased, the journal is unchanged\n"
    assert journal_bytes(tmp_path) == journal
    acme = json.loads(cli("retention", "apply", "--data-dir", str(tmp_path), "--tenant", "acme", "--older-than", "0s",
                          "--json").stdout)
    assert acme["counts"]["facts_deleted_now"] == 1 and acme["selection"]["tenant"] == "acme"
    assert b"CLI_KEEP_MARKER" in journal_bytes(tmp_path)
    applied = json.loads(cli("retention", "apply", "--data-dir", str(tmp_path), "--all-tenants", "--older-than", "0s",
                             "--json").stdout)
    assert applied["kind"] == "retention" and applied["counts"]["facts_deleted_now"] == 2
    assert applied["verification"]["ok"]
    assert b"CLI_KEEP_MARKER" not in journal_bytes(tmp_path)


def test_export_audit_formats(tmp_path, cli):
    _seed(tmp_path)
    for fmt in ("jsonl", "csv", "sqlite"):
        out = tmp_path.parent / f"out.{fmt}"
        summary = json.loads(cli("export", "audit", "--data-dir", str(tmp_path), "--format", fmt, "--output", str(out),
                                 "--tenant", "default", "--json").stdout)
        assert summary["events"] == 2 and summary["format"] == fmt and out.exists()
    bad = cli("export", "audit", "--data-dir", str(tmp_path), "--format", "xml", "--output", "x", ok=False)
    assert bad.exit_code == 1 and bad.output.startswith("Error: Invalid value for '--format'")
    result = cli("export", "audit", "--data-dir", str(tmp_path), "--format", "jsonl", "--output", str(out),
                 "--tenant", "default")
    assert result.stdout == f"wrote 2 event(s), {out.stat().st_size} bytes, to {out} (recorded for erasure)\n"
    assert result.stderr == (f"warning: {out} is outside the data directory, out of erasure's reach: an erasure "
                             "cannot rewrite it; it is recorded, and erasure reports and `verify --erasure` name it "
                             "while it holds erased values\n")
    missing = tmp_path.parent / "no-such-dir" / "out.jsonl"
    bad = cli("export", "audit", "--data-dir", str(tmp_path), "--format", "jsonl", "--output", str(missing), ok=False)
    assert bad.output == f"Error: --output '{missing}': directory '{missing.parent}' does not exist\n"
    assert not missing.parent.exists()


def test_full_cli_erase_then_verify_erasure_exit_codes(tmp_path):
    from cruxsql.cli import main
    runner = CliRunner()
    env = {"CRUXSQL_DATA_DIR": str(tmp_path)}
    keep, gone = _seed(tmp_path)
    result = runner.invoke(main, ["erase", "--all-tenants", "--fact-id", gone.fact_id, "--reason", "DSR 9"], env=env)
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["verify", "--erasure"], env=env)
    assert result.exit_code == 0 and "erasure verified" in result.output
    # someone copies the erased value back into the data directory
    (tmp_path / "copy.txt").write_text("prefix CLI_GONE_MARKER Bob suffix")
    result = runner.invoke(main, ["verify", "--erasure", "--json"], env=env)
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["ok"] is False and report["hits"][0]["file"] == "copy.txt" and report["hits"][0]["offset"] == 7


def test_erasure_report_is_in_its_tenants_audit_export(tmp_path, cli):
    _seed(tmp_path)
    cli("erase", "--data-dir", str(tmp_path), "--tenant", "acme", "--reason", "DSR 5", "--request-id", "dsr-5")
    exported = {}
    for tenant in ("acme", "default"):
        out = tmp_path.parent / f"{tenant}.jsonl"
        cli("export", "audit", "--data-dir", str(tmp_path), "--tenant", tenant, "--format", "jsonl",
            "--output", str(out))
        exported[tenant] = [json.loads(line) for line in out.read_text().splitlines()]
    assert "__erasure_report__::dsr-5" in json.dumps(exported["acme"])
    assert "__erasure_report__::dsr-5" not in json.dumps(exported["default"])
    assert "CLI_GONE_MARKER_2" not in json.dumps(exported["acme"])
