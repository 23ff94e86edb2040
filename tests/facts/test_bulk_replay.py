"""The bulk replay path (rebuilds, long tails) builds exactly the tables the row-by-row Applier builds."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cruxsql
from cruxsql.facts import bulk, codec, line_decoder, privacy, replay, timestamps, view, view_file
from cruxsql.facts.codec import Fact
from cruxsql.facts.journal import Journal
from cruxsql.recall.text_index import TextIndex  # importing it registers recall's replay hooks
from support.mixed_journal import T0, mixed_journal, present_text_index, tables

# these test the text index's own sync: writes leave indexing to it here (conftest.py)
pytestmark = pytest.mark.usefixtures("lazy_text_index")


def _rebuilt(data: Path, journal_bytes: bytes, row_by_row: bool) -> apsw.Connection:
    data.mkdir()
    (data / "facts.jsonl").write_bytes(journal_bytes)
    db = view_file.open_connection(data / view_file.DB_NAME)
    replay.rebuild(db, Journal(data), privacy.global_policy(), row_by_row=row_by_row)
    return db


def _assert_same(a: apsw.Connection, b: apsw.Connection) -> None:
    """`b`, replayed in bulk, equals `a`, replayed row by row, once a read brought `a`'s text index up to
    date (bulk replay indexes what it brings in; the row path leaves that to the next read)."""
    assert TextIndex(b).is_current()
    assert not TextIndex(a).is_current()
    TextIndex(a).sync()
    ta, tb = tables(a), tables(b)
    assert ta.keys() == tb.keys()
    for name in ta:
        if name not in ("recall_text", "recall_grams"):
            assert ta[name] == tb[name], f"table {name} differs"
    # A fact that a later batch removed from the view (replace_latest) keeps the text row and postings
    # a batch that indexed it wrote (recall joins on facts): what must agree is every present fact's.
    assert present_text_index(a) == present_text_index(b)


@pytest.fixture
def private_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(privacy.ALWAYS_PRIVATE_ENV, "secret::")
    privacy.install_global(None)


@pytest.mark.slow
@pytest.mark.parametrize("batch_lines", [bulk.BATCH_LINES, 97])
def test_bulk_rebuild_equals_the_row_by_row_replay(tmp_path: Path, monkeypatch, private_secrets,
                                                   batch_lines: int) -> None:
    # Different transaction boundaries on the two paths (the row path commits every 97 lines and extends
    # the known_at timeline after each; a bulk rebuild extends it once): the derived tables must not
    # depend on them (rows of a fact that a later line hard-removes used to).
    monkeypatch.setattr(bulk, "BATCH_LINES", batch_lines)
    monkeypatch.setattr(replay, "_COMMIT_EVERY", 97)
    journal = mixed_journal()
    rows = _rebuilt(tmp_path / "rows", journal, row_by_row=True)
    fast = _rebuilt(tmp_path / "bulk", journal, row_by_row=False)
    _assert_same(rows, fast)
    # the journal exercises what it claims to: every op, every skip reason, corrupt lines, the timeline
    ops = {r[0] for r in fast.execute("SELECT DISTINCT op FROM journal_events")}
    assert ops == set(codec.ALL_OPS)
    reasons = {r[0].split(" f_")[0] for r in fast.execute("SELECT DISTINCT skip_reason FROM journal_events "
                                                          "WHERE skip_reason IS NOT NULL")}
    assert {"duplicate fact_id", "unknown fact_id", "tenant mismatch", view.TOMBSTONE, "consolidation member",
            "invalid source", "undo source set does not match"} <= reasons
    corrupt = [r[0] for r in fast.execute("SELECT reason FROM journal_corrupt_lines")]
    assert len(corrupt) > 20 and any("duplicate field" in r for r in corrupt) and any("nested" in r for r in corrupt)
    assert fast.execute("SELECT count(*) FROM recall_changes").fetchone()[0] > 500
    assert fast.execute("SELECT count(*) FROM facts WHERE private = 1 AND entity LIKE 'secret::%'").fetchone()[0] > 5


@pytest.mark.slow
def test_bulk_tail_replay_equals_the_row_by_row_tail(tmp_path: Path, monkeypatch, private_secrets) -> None:
    journal = mixed_journal(seed=11)
    head = journal[:journal.index(b"\n", len(journal) // 3) + 1]
    monkeypatch.setattr(bulk, "BATCH_LINES", 211)
    monkeypatch.setattr(replay, "_COMMIT_EVERY", 211)
    views = []
    for name, row_path_max in (("rows", 10**12), ("bulk", 0)):
        data = tmp_path / name
        db = _rebuilt(data, head, row_by_row=True)
        (data / "facts.jsonl").write_bytes(journal)
        monkeypatch.setattr(replay, "ROW_PATH_MAX_BYTES", row_path_max)
        stats = replay.replay(db, Journal(data), privacy.global_policy())
        assert not stats.rebuilt and stats.events > 1000
        views.append(db)
    _assert_same(*views)


def test_a_bulk_rebuild_keeps_the_view_equal_to_a_fresh_replay_through_the_store(tmp_path: Path) -> None:
    (tmp_path / "facts.jsonl").write_bytes(mixed_journal(seed=3, events=800))
    with cruxsql.open(tmp_path) as store:
        assert store.last_replay.rebuilt
        store.store("svc", "owner", "after the rebuild")
        store.rebuild()
        report = store.verify()
        assert report.view_matches_replay and report.differences == []


def test_the_fast_decoder_hands_every_doubt_to_the_codec() -> None:
    fact = json.loads(codec.encode_event(codec.StoreEvent(Fact(
        fact_id="f_1", entity="e", key="k", value="v", confidence=0.9, stored_at=T0 + 5, tokens=1))))
    plain = json.dumps(fact, separators=(",", ":")).encode()
    op, payload = line_decoder.decode_fast(plain)
    assert op == "store" and payload[0][:9] == ("f_1", "default", "e", "k", "v", None, codec.to_f32(0.9),
                                                "2026-03-01T08:00:00.000000005Z", T0 + 5)
    doubtful = [
        plain.replace(b'"value":"v"', b'"value":"v","value":"w"'),  # a repeated field
        plain.replace(b'"value":"v"', b'"value" :"v"'),  # whitespace: keys cannot be counted
        plain.replace(b'"value":"v"', b'"value":"\\ud800"'),  # a lone surrogate
        plain.replace(b'.000000005Z', b'.000000005+00:00'),  # a time not in chrono's own format
        plain.replace(b'"tokens":1', b'"tokens":true'),
        plain.replace(b'"v"', b'"\xff"'),
    ]
    for raw in doubtful:
        with pytest.raises(line_decoder._Slow):
            line_decoder.decode_fast(raw)


def test_a_rebuild_reports_progress_before_it_clears_the_old_view(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        store.store_batch([cruxsql.StoreRequest(f"e{i}", "k", f"v{i}") for i in range(400)])  # > 64 KiB: bulk
        calls: list[tuple[int, int, int]] = []

        def progress(done: int, total: int) -> None:
            calls.append((done, total, store.db.execute("SELECT count(*) FROM facts").fetchone()[0]))

        stats = store.rebuild(progress)
        size = (tmp_path / "facts.jsonl").stat().st_size
        # the bar starts while the old rows are still there (clearing a big view takes seconds)
        assert calls[0] == (0, size, 400)
        assert calls[-1][:2] == (size, size) and stats.events == 1
        # the bar moves forward and reaches 100% only once everything is built (the deferred indexes and
        # replay hooks take their share of it: minutes on a big journal)
        dones = [done for done, _, _ in calls]
        stages = {size * 45 // 100, int(size * 0.48), int(size * 0.6), int(size * 0.83)}
        assert dones == sorted(dones) and dones.count(size) == 1 and stages <= set(dones)


def test_a_time_is_taken_as_is_exactly_when_chrono_would_write_it_so() -> None:
    rng = random.Random(3)
    edges = ["2026-01-01T00:00:009Z", "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00.1234Z", "2026-01-01T00:00Z",
             "2026-01-01T00:00:0Z", "2026-01-01T00:00:00ZZ", "2026-01-01T00:00:00.12Z", "Z", ""]
    for i in range(5000 + len(edges)):
        text = edges[i - 5000] if i >= 5000 else "".join((
                        rng.choice(("2026", "1677", "2262", "1999")), "-", rng.choice(("01", "02", "13")), "-",
                        rng.choice(("01", "29", "31", "00")), rng.choice(("T", "t", " ")),
                        rng.choice(("00", "23", "24")), ":", rng.choice(("00", "59", "60")), ":",
                        rng.choice(("00", "59", "60")),
                        rng.choice(("", ".5", ".123", ".000", ".120", ".123400", ".123000", ".000000001", ".100000000")),
                        rng.choice(("Z", "Z", "+00:00", "z"))))
        if i < 5000 and rng.random() < 0.3:  # a character cut out, doubled or replaced (a non-ASCII digit among them)
            at = rng.randrange(len(text))
            text = text[:at] + rng.choice(("", text[at] * 2, "\u0663", "\uff12", "+", "-", " ", "9", ".")) + text[at + 1:]
        try:
            parsed = timestamps.parse_ns(text)
            canonical = timestamps.format_fact_time(parsed) == text
        except cruxsql.InvalidInput:
            canonical = False
        ns = timestamps.canonical_fact_time_ns(text)
        assert (ns is not None) == canonical, text
        assert ns is None or ns == parsed
        if text.endswith(("Z", "+00:00")):  # parse_ns's own fast path agrees with its general one
            general = text.removesuffix("Z").removesuffix("+00:00") + " UTC"
            try:
                assert timestamps.parse_ns(text) == timestamps.parse_ns(general)
            except cruxsql.InvalidInput:
                with pytest.raises(cruxsql.InvalidInput):
                    timestamps.parse_ns(general)


@pytest.mark.parametrize("row_by_row", [False, True])
def test_a_rebuild_without_derived_tables_fills_only_the_fact_and_event_tables(tmp_path: Path, monkeypatch,
                                                                               row_by_row: bool) -> None:
    # what verify's scratch copy needs: the tables it compares, not ~20 s (at 1M facts) of derived ones
    monkeypatch.setattr(replay, "ROW_PATH_MAX_BYTES", 0)  # unless row_by_row, the bulk path
    (tmp_path / "facts.jsonl").write_bytes(mixed_journal(seed=5, events=600))
    db = view_file.open_connection(tmp_path / view_file.DB_NAME)
    replay.rebuild(db, Journal(tmp_path), privacy.global_policy(), row_by_row=row_by_row, derived=False)
    counts = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("facts", "journal_events", "recall_event_times", "recall_text", "fact_norms")}
    assert counts["facts"] > 100 and counts["journal_events"] > 500
    assert counts["recall_event_times"] == counts["recall_text"] == counts["fact_norms"] == 0
    replay.rebuild(db, Journal(tmp_path), privacy.global_policy(), row_by_row=row_by_row)
    assert db.execute("SELECT count(*) FROM recall_event_times").fetchone()[0] == counts["journal_events"]
    assert db.execute("SELECT count(*) FROM fact_norms").fetchone()[0] > 0


# --- the compiled fast decoder never judges a line differently from the codec -------------------------

_FACT_KEYS = tuple(codec.Fact.__dataclass_fields__)
_EVENT_KEYS = ("op", "fact", "facts", "fact_id", "by_fact_id", "deleted_at", "superseded_at", "cleared_at",
               "valid_from", "valid_to", "set_at", "horizon_class", "reverified_at", "junk")
_TIMES = ("2026-03-01T08:00:00Z", "2026-03-01T08:00:00.5Z", "2026-03-01T08:00:00.500Z", "2016-12-31T23:59:60.5Z",
          "2026-03-01T08:00:00.123456789Z", "2026-03-01T08:00:00+00:00", "2026-03-01 08:00:00Z", "2262-04-11T23:47:16Z",
          "1677-09-21T00:12:43.145224192Z", "1677-09-21T00:12:43.145224191Z", "2026-02-30T08:00:00Z", "",
          "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "+10000-01-01T00:00:00Z", "-0001-12-31T23:59:60.5Z")
# Numbers at every edge serde or the view cares about: u32, i64, u64 bounds, -0, floats and integral floats,
# out-of-range and denormal floats, huge integers.
_NUMBERS = ("0", "-0", "1", "-1", "4294967295", "4294967296", "9223372036854775807", "9223372036854775808",
            "18446744073709551615", "18446744073709551616", "1" + "0" * 40, "1.0", "1e2", "1E2", "-0.0", "0.5",
            "3.4028235e38", "3.4028236e38", "1e39", "1e308", "1e400", "-1e400", "1e-400", "-1e-46", "1.4e-45",
            "0.30000001192092896", "00", "1.", ".5", "+1", "NaN", "Infinity", "-Infinity")
_json_leaf = st.one_of(
    st.sampled_from(_NUMBERS), st.sampled_from(_NUMBERS), st.sampled_from(["null", "true", "false", "[]", "{}", '[""]', '{"a":1}']),
    st.sampled_from(_TIMES + codec.HORIZON_CLASSES).map(json.dumps),
    st.text(max_size=6).map(lambda s: json.dumps(s, ensure_ascii=False)),
    st.text(max_size=6).map(json.dumps),  # \u escapes, lone surrogates among them
    st.sampled_from(['"\\ud800"', '"\\udc00x"', '"\\u00e9"', '"a\\/b"', '"\\n"', '"\t"', '"\x7f"', '"\\x"', '"a\\"b":"']),
)


def _fact_text(draw: st.DrawFn) -> str:
    ns = draw(st.one_of(st.integers(timestamps.CHRONO_MIN_NS, timestamps.CHRONO_MAX_NS), st.just(T0)))
    return codec.Fact(
        fact_id=draw(st.sampled_from(("f_1", "f_2", ""))), entity=draw(st.text(max_size=5)), key="k",
        value=draw(st.text(max_size=8)), confidence=codec.to_f32(draw(st.floats(-1, 1))), stored_at=ns,
        tokens=draw(st.integers(0, 2**64 - 1)), tenant_hash=draw(st.sampled_from(("default", "", "t1"))),
        source_receipt=draw(st.none() | st.text(max_size=3)), version=draw(st.integers(0, 2**32 - 1)),
        supersedes=draw(st.none() | st.just("f_0")), private=draw(st.booleans()),
        horizon_class=draw(st.sampled_from(codec.HORIZON_CLASSES)), reverified_at=draw(st.none() | st.just(ns)),
        actor=draw(st.none() | st.just("a")), valid_from=draw(st.none() | st.just(T0)),
        access_count=draw(st.integers(0, 3)), last_accessed_at=draw(st.none() | st.just(T0 + 1)),
    ).to_json()


@st.composite
def _adversarial_line(draw: st.DrawFn) -> bytes:
    """A line the journal could hold: a well-formed event of a fast-path op, then edits on its text (a
    field set to an odd value, removed, repeated, an unknown key, whitespace, a byte changed)."""
    fid = json.dumps(draw(st.sampled_from(("f_1", "f_2"))))
    at = json.dumps(draw(st.sampled_from(_TIMES)))
    kind = draw(st.sampled_from(("store", "store_batch", "delete", "supersede", "clear_supersede", "set_validity",
                                 "set_horizon", "reverify")))
    body = {
        "store": lambda: '"fact":' + _fact_text(draw),
        "store_batch": lambda: '"facts":[' + ",".join(_fact_text(draw) for _ in range(draw(st.integers(0, 2)))) + "]",
        "delete": lambda: f'"fact_id":{fid},"deleted_at":{at}',
        "supersede": lambda: f'"fact_id":{fid},"by_fact_id":"f_2","superseded_at":{at}',
        "clear_supersede": lambda: f'"fact_id":{fid},"cleared_at":{at}',
        "set_validity": lambda: f'"fact_id":{fid},"valid_from":{at},"set_at":{at}',
        "set_horizon": lambda: f'"fact_id":{fid},"horizon_class":"stable","set_at":{at}',
        "reverify": lambda: f'"fact_id":{fid},"reverified_at":{at}',
    }[kind]()
    text = '{"op":"' + kind + '",' + body + "}"
    for _ in range(draw(st.integers(0, 3))):
        edit = draw(st.sampled_from(("set", "set", "set", "remove", "repeat", "space", "byte")))
        present = re.findall(r'"(\w+)":', text)  # mostly a key the line has, sometimes any other
        key = draw(st.sampled_from(present) if present and draw(st.integers(0, 3)) else
                   st.sampled_from(_FACT_KEYS + _EVENT_KEYS))
        spot = re.search('"' + key + '":', text)
        if edit == "set" and spot is not None:  # the value after the key, up to the next comma or brace
            end = re.compile(r'("(?:[^"\\]|\\.)*"|[^,}\]]*)').match(text, spot.end()).end()
            text = text[:spot.end()] + draw(_json_leaf) + text[end:]
        elif edit == "remove" and spot is not None:
            end = re.compile(r'("(?:[^"\\]|\\.)*"|[^,}\]]*),?').match(text, spot.end()).end()
            text = text[:spot.start()] + text[end:]
        elif edit in ("repeat", "set"):  # a key (again, or new) at the start of an object
            starts = [m.end() for m in re.finditer(r"\{", text)]
            at_ = draw(st.sampled_from(starts))
            text = text[:at_] + '"' + key + '":' + draw(_json_leaf) + "," + text[at_:]
        elif edit == "space":
            at_ = draw(st.integers(0, len(text)))
            text = text[:at_] + draw(st.sampled_from((" ", "\t", "\r", "\n", "\x0c", "\u00a0"))) + text[at_:]
    raw = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()) and raw:
        at_ = draw(st.integers(0, len(raw) - 1))
        raw = raw[:at_] + draw(st.sampled_from((b"", b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"\x00", b"\\", b'"',
                                                b",", b"}", b"]", b":", b"0", b"-", b"e"))) + raw[at_ + 1:]
    return raw


def _exact(value: object) -> object:
    """A payload with every float as its bits (-0.0 is not 0.0) and every leap second with its fraction."""
    if isinstance(value, (list, tuple)):
        return type(value)(_exact(v) for v in value)
    if type(value) is float:
        return ("float", value.hex())
    if isinstance(value, timestamps.LeapSecond):
        return ("leap", int(value), value.fraction)
    return value


def _payload_of(event: codec.Event) -> tuple[str, object]:
    """The (op, payload) `line_decoder.decode_fast` must give for a line the codec decoded as `event`."""
    def text(ns: int | None) -> str | None:
        return None if ns is None else timestamps.format_fact_time(ns)

    ns = timestamps.column_ns  # an instant outside 1677-2262 is held clamped, its text exact

    def row(f: Fact) -> tuple:
        big = f.tokens > 2**63 - 1
        return (f.fact_id, f.tenant_hash, f.entity, f.key, f.value, f.source_receipt, f.confidence, text(f.stored_at),
                ns(f.stored_at), min(f.tokens, 2**63 - 1), int(f.deleted), f.version, f.supersedes, int(f.private),
                f.horizon_class, text(f.reverified_at), ns(f.reverified_at), f.superseded_by, f.actor,
                text(f.valid_from), ns(f.valid_from), text(f.valid_to), ns(f.valid_to), f.access_count,
                text(f.last_accessed_at), ns(f.last_accessed_at), str(f.tokens) if big else None,
                "-0.0" if str(f.confidence) == "-0.0" else None)

    e: object = event
    if isinstance(e, codec.StoreEvent):
        return "store", [row(e.fact)]
    if isinstance(e, codec.StoreBatchEvent):
        return "store_batch", [row(f) for f in e.facts]
    if isinstance(e, codec.DeleteEvent):
        return "delete", (e.fact_id, e.deleted_at)
    if isinstance(e, codec.SupersedeEvent):
        return "supersede", (e.fact_id, e.by_fact_id, e.superseded_at)
    if isinstance(e, codec.ClearSupersedeEvent):
        return "clear_supersede", (e.fact_id, e.cleared_at)
    if isinstance(e, codec.SetValidityEvent):
        return "set_validity", (e.fact_id, text(e.valid_from), ns(e.valid_from), text(e.valid_to), ns(e.valid_to), e.set_at)
    if isinstance(e, codec.SetHorizonEvent):
        return "set_horizon", (e.fact_id, e.horizon_class, e.set_at)
    assert isinstance(e, codec.ReverifyEvent)
    return "reverify", (e.fact_id, text(e.reverified_at), ns(e.reverified_at))


def _fast_agrees_with_the_codec(raw: bytes) -> bool:
    """True if the fast decoder took `raw` (then the codec accepts it too, with the same values), False if
    it handed the line to the codec."""
    try:
        fast = line_decoder.decode_fast(raw)
    except line_decoder._Slow:
        return False
    try:
        event = codec.decode_event(raw)
    except codec.CorruptLine as exc:
        raise AssertionError(f"the fast decoder accepted {raw!r}, which the codec refuses: {exc}") from None
    assert _exact(fast) == _exact(_payload_of(event)), raw
    return True


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_adversarial_line())
def test_the_fast_decoder_never_accepts_what_the_codec_refuses_nor_decodes_differently(raw: bytes) -> None:
    _fast_agrees_with_the_codec(raw)


def test_the_fast_decoder_takes_the_journal_lines_crux_writes_and_refuses_each_edge() -> None:
    # the fast path is taken at all (a decoder handing everything to the codec would pass the test above)
    journal = mixed_journal(seed=13, events=1500).split(b"\n")
    fast = sum(_fast_agrees_with_the_codec(raw.removesuffix(b"\r")) for raw in journal)
    assert fast > 0.6 * len(journal)
    line = codec.encode_event(codec.StoreEvent(Fact(fact_id="f_1", entity="e", key="k", value="v", confidence=0.5,
                                                    stored_at=T0, tokens=1))).encode()
    assert _fast_agrees_with_the_codec(line)
    assert _fast_agrees_with_the_codec(line.replace(b'"value":"v"', b'"value":"\\u0001\\ud83d\\ude00\\/"'))
    assert _fast_agrees_with_the_codec(line.replace(b'"tokens":1', b'"tokens":18446744073709551615'))  # usize
    for edited in (line.replace(b'"tokens":1', b'"tokens":18446744073709551616'),  # beyond usize
                   line.replace(b'"version":1', b'"version":4294967296'),  # u32
                   line.replace(b'"deleted":false', b'"deleted":false,"deleted":false'),  # serde: duplicate field
                   line.replace(b'{"op":"store"', b'{"op":"store","op":"store"'),
                   line.replace(b'"value":"v"', b'"value":"\\ud800"'),  # a lone surrogate
                   line.replace(b'"value":"v"', b'"value":"\\udc00\\ud800"'),
                   line.replace(b'"confidence":0.5', b'"confidence":1e39'),  # beyond f32
                   line.replace(b'"confidence":0.5', b'"confidence":NaN'),
                   line.replace(b'"value":"v"', b'"value":"\xed\xa0\x80"'),  # a UTF-8-encoded surrogate
                   line.replace(b'"value":"v"', b'"value":"\t"'),  # a raw control character
                   line.replace(b'"key":"k"', b'"key" :"k","key":"j"'),
                   line.replace(b'"tokens":1', b'"tokens":1.0'),
                   line.replace(b'"fact":{', b'"fact":{"deep":' + b"[" * 200 + b"]" * 200 + b",")):
        assert not _fast_agrees_with_the_codec(edited), edited


_EDGE_VALUES = (*_NUMBERS, "null", "true", "false", "[]", "{}", '""', '"x"', *map(json.dumps, _TIMES + codec.HORIZON_CLASSES),
                '"\\ud800"', '"\\udc00x"', '"\\u00e9\\u0001"', '"a\\/b"', '"\t"', '"\x7f"', '"\\x"', '"a\\":"', '"\udcff"')


def test_every_field_set_to_every_edge_value_repeated_or_removed_is_judged_as_the_codec_judges_it() -> None:
    # the sweep behind the random lines above: each key of each fast-path op's line, in turn
    fact = codec.Fact(fact_id="f_1", entity="e", key="k", value="v", confidence=0.5, stored_at=T0, tokens=1,
                      supersedes="f_0", reverified_at=T0, superseded_by="f_2", actor="a", valid_from=T0,
                      valid_to=T0 + 1, access_count=2, last_accessed_at=T0 + 2, source_receipt="r")
    at = timestamps.format_fact_time(T0)
    lines = [codec.encode_event(e) for e in (
        codec.StoreEvent(fact), codec.StoreBatchEvent([fact, fact]), codec.DeleteEvent("f_1", at),
        codec.SupersedeEvent("f_1", "f_2", at), codec.ClearSupersedeEvent("f_1", at),
        codec.SetValidityEvent("f_1", T0, T0 + 1, at), codec.SetHorizonEvent("f_1", "stable", at),
        codec.ReverifyEvent("f_1", T0))]
    taken = refused = 0
    for line in lines:
        assert _fast_agrees_with_the_codec(line.encode())
        for spot in re.finditer(r'"(\w+)":("(?:[^"\\]|\\.)*"|[^,{}\[\]]+)', line):  # each key with a scalar value
            head, tail = line[:spot.start()], line[spot.end():]
            edited = [head + tail.removeprefix(","), head + spot.group(0) + "," + spot.group(0) + tail]
            edited += [head + f'"{spot.group(1)}":{value}' + tail for value in _EDGE_VALUES]
            for text in edited:
                if _fast_agrees_with_the_codec(text.encode("utf-8", "surrogateescape")):
                    taken += 1
                else:
                    refused += 1
    assert taken > 800 and refused > 4000
