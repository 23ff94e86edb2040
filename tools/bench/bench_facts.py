"""Fact substrate benchmark: rebuild vs parse-only (and vs the row-by-row replay), open+query vs
rebuild, store vs bare write+fsync, store_batch vs one write+fsync of the same bytes.

    python tools/bench/bench_facts.py                 # 1,000,000 events (a few minutes)
    python tools/bench/bench_facts.py --events 100000 # quicker
    python tools/bench/bench_facts.py --store-latency-only DIR --stores 1000  # store() rows only
    ... --store-latency-only DIR --pause-ms 20  # each store() after a pause (an agent's pace)
    python tools/bench/bench_facts.py --store-batch-from DIR --workdir W  # store_batch into a copy of DIR
    python tools/bench/bench_facts.py --events-10m    # the 10,000,000-event rebuild only (time, peak memory)
    python tools/bench/bench_facts.py --rebuild-vs OLD_CHECKOUT  # this code's rebuild vs another checkout's
    python tools/bench/bench_facts.py --floor-only    # a lower bound for the rebuild (decode, bare inserts)
    python tools/bench/bench_facts.py --decoders-vs OLD_CHECKOUT  # the bulk decoders side by side, one process
    python tools/bench/bench_facts.py --events 20000 --compare a4f6f8d --compare a27032b  # store() and the
        first recall after a burst of single writes: this code and older commits', each in its own process

Every figure is printed beside a baseline measured in the same run, with the ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from journal_gen import generate  # noqa: E402
from commits import code_of_commit  # noqa: E402
from store_latency import bench_store_latency  # noqa: E402

import apsw  # noqa: E402

import cruxsql  # noqa: E402
from cruxsql.facts import bulk, codec, derived_tables, line_decoder, privacy, replay, timestamps, view, view_file  # noqa: E402
from cruxsql.facts.journal import MAX_RECORD_BYTES, Journal  # noqa: E402
from cruxsql.console.readonly_sql import run_readonly_query  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def bench_parse(journal: Path) -> float:
    started = time.perf_counter()
    n = 0
    with open(journal, "rb") as fh:
        for line in fh:
            json.loads(line)
            n += 1
    return time.perf_counter() - started


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_rebuild(journal: Path, work: Path) -> tuple[float, Path, int, float]:
    """A full rebuild (the first open of the journal, bulk path): seconds, data dir, events, and how
    much it raised the process's peak RSS (MiB). Prints when each of its phases ended."""
    data = work / "rebuild"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    shutil.copy(journal, data / "facts.jsonl")
    peak = peak_rss_mib()
    started = time.perf_counter()
    ends: list[tuple[str, float, float]] = []

    def timed(name: str, fn):
        def run(*args, **kwargs):
            result = fn(*args, **kwargs)
            ends.append((name, time.perf_counter() - started, peak_rss_mib() - peak))
            return result
        return run

    # when each phase of the rebuild ended: wrap the steps that end them (sanitize_links comes after
    # the last line, restore_indexes next, the replay hooks, then the bulk replay hooks: a checkout
    # from before those existed has no such phase)
    phases = [(view.Applier, "sanitize_links", "lines read and applied, links sanitised"),
              (bulk.BulkApplier, "restore_indexes", "deferred indexes built"),
              (derived_tables, "run_replay_hooks", "replay hooks (known_at timeline, fact_norms) run"),
              (derived_tables, "run_bulk_replay_hooks", "bulk replay hooks (recall's text index) run")]
    phases = [phase for phase in phases if hasattr(phase[0], phase[1])]
    originals = [getattr(owner, name) for owner, name, _ in phases]
    try:
        for (owner, name, label), original in zip(phases, originals):
            setattr(owner, name, timed(label, original))
        with cruxsql.open(data) as store:
            events = store.last_replay.events
    finally:
        for (owner, name, _), original in zip(phases, originals):
            setattr(owner, name, original)
    for label, at, growth in ends:
        print(f"  rebuild phase: {label} at {at:.1f} s (peak RSS growth {growth:.0f} MiB)")
    return time.perf_counter() - started, data, events, peak_rss_mib() - peak


# What the bulk path records for each fast-path op that names a stored fact: the role of the fact it
# names first, and where its payload keeps the line's time (a supersede line also names its successor).
_FLOOR_NAMES = {"delete": ("deleted", 1), "supersede": ("superseded", 2), "clear_supersede": ("cleared", 1),
                "set_validity": ("validity", 5), "set_horizon": ("horizon", 2), "reverify": ("reverified", 1)}


def _floor_decode(raw: bytes) -> tuple | None:
    """One journal line decoded with the checks `BulkApplier.decode_line` makes: (op, payload, None) from
    the bulk path's decoder, (op, None, event) from the codec, None for a blank or corrupt line."""
    raw = raw[:-1] if raw.endswith(b"\n") else raw
    raw = raw[:-1] if raw.endswith(b"\r") else raw
    if not raw.strip(bulk._ASCII_WS) or len(raw) > MAX_RECORD_BYTES:
        return None
    try:
        try:
            return (*line_decoder.decode_fast(raw), None)
        except line_decoder._Slow:
            event = codec.decode_event(raw)
            return event.op, None, event
    except codec.CorruptLine:
        return None


def bench_floor(journal: Path, work: Path) -> tuple[float, float, int]:
    """A lower bound for this design's rebuild of `journal`, in two timed steps: (1) read and decode every
    line with the rebuild's own checks (`_floor_decode`); (2) insert the fewest rows the view holds (a
    facts row per stored fact, an event row per line, an event-fact row per fact a line names, with the
    roles and times the rebuild records) into tables with no index, no key and no constraint, applying
    no replay rule and building no derived table, then commit and close (the WAL copied into the file,
    as when a rebuilt store closes). Returns (decode s, insert s, lines)."""
    path = work / "floor.db"
    files = (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
    for stale in files:
        stale.unlink(missing_ok=True)
    db = apsw.Connection(str(path))
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(f"CREATE TABLE facts ({', '.join(view.FACT_COLUMNS)})")
        db.execute("CREATE TABLE journal_events (line_no, byte_offset, byte_length, op, fact_id, event_at, applied, "
                   "skip_reason)")
        db.execute("CREATE TABLE journal_event_facts (line_no, fact_id, role)")
        facts_sql = f"INSERT INTO facts VALUES ({', '.join('?' * len(view.FACT_COLUMNS))})"
        decode_s = insert_s = 0.0
        line_no = offset = seq = 0
        db.execute("BEGIN")
        with open(journal, "rb") as fh:
            while True:
                started = time.perf_counter()
                lines = fh.readlines(1 << 23)
                decoded = list(map(_floor_decode, lines))
                decode_s += time.perf_counter() - started
                if not lines:
                    break
                started = time.perf_counter()
                facts, events, names = [], [], []
                for raw, item in zip(lines, decoded):
                    line_no += 1
                    if item is not None:
                        op, payload, event = item
                        if event is not None:  # a line the codec decoded: the facts it carries
                            carried = codec.event_facts(event)
                            for fact in carried:
                                seq += 1
                                facts.append(view.fact_row(fact, seq, line_no))
                                names.append((line_no, fact.fact_id, "stored"))
                            first, at = carried[0].fact_id if carried else None, codec.event_time_text(event)
                        elif op in ("store", "store_batch"):
                            for v in payload:
                                seq += 1
                                facts.append((*v, seq, line_no))
                                names.append((line_no, v[0], "stored"))
                            first, at = (payload[0][0], payload[0][7]) if payload else (None, None)
                        else:
                            role, at_index = _FLOOR_NAMES[op]
                            first, at = payload[0], payload[at_index]
                            names.append((line_no, first, role))
                            if op == "supersede":
                                names.append((line_no, payload[1], "superseding"))
                        events.append((line_no, offset, len(raw), op, first, at, 1, None))
                    offset += len(raw)
                db.executemany(facts_sql, facts)
                db.executemany("INSERT INTO journal_events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", events)
                db.executemany("INSERT INTO journal_event_facts VALUES (?, ?, ?)", names)
                insert_s += time.perf_counter() - started
        started = time.perf_counter()
        db.execute("COMMIT")
        db.close()
        insert_s += time.perf_counter() - started
        return decode_s, insert_s, line_no
    finally:
        db.close()
        for leftover in files:
            leftover.unlink(missing_ok=True)


def print_floor_rows(events: int, parse_s: float, decode_s: float, insert_s: float) -> None:
    print(f"{'rebuild floor: read + decode, events/s':<48}{events / decode_s:>14,.0f}"
          f"{events / parse_s:>14,.0f}{parse_s / decode_s:>10.3f}")
    floor_s = decode_s + insert_s
    print(f"{'rebuild floor: decode + bare inserts, events/s':<48}{events / floor_s:>14,.0f}"
          f"{events / parse_s:>14,.0f}{parse_s / floor_s:>10.3f}")


def first_query(data: Path) -> float:
    """Seconds the first recall over a just-rebuilt view takes (whatever the rebuild left to it)."""
    from cruxsql.recall.facade import Recall
    with cruxsql.open(data) as store:
        started = time.perf_counter()
        Recall(store, refresh=False).query_facts("canary", contract="legacy", record_access=False)
        return time.perf_counter() - started


def bench_rebuild_paths(journal: Path, work: Path, events: int) -> tuple[float, float, int]:
    """The first `events` lines rebuilt by the bulk path and by the row-by-row Applier (what every
    rebuild used before), each into a fresh view: (bulk seconds, row seconds, events)."""
    src = work / f"paths-{events}.jsonl"
    if not src.exists():
        with open(journal, "rb") as fh, open(src, "wb") as out:
            for _, line in zip(range(events), fh):
                out.write(line)
    times = []
    for row_by_row in (False, True):
        data = work / f"paths-{'rows' if row_by_row else 'bulk'}"
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        shutil.copy(src, data / "facts.jsonl")
        db = view_file.open_connection(data / view_file.DB_NAME)
        started = time.perf_counter()
        stats = replay.rebuild(db, Journal(data), privacy.global_policy(), row_by_row=row_by_row)
        times.append(time.perf_counter() - started)
        db.close()
    return times[0], times[1], stats.events


class _SyncCounter(apsw.VFS):
    """The default VFS, counting the syncs SQLite asks of it (registered before the store opens): on the
    thread that calls the store, and on any other (the background WAL checkpointer)."""

    syncs = 0
    background = 0
    caller = threading.get_ident()

    def __init__(self) -> None:
        self.base = apsw.vfs_names()[0]  # the default before this one replaces it
        super().__init__("bench-sync-counter", base=self.base, makedefault=True)

    def xOpen(self, name, flags):  # noqa: N802 (apsw's name)
        return _SyncCountingFile(self.base, name, flags)


class _SyncCountingFile(apsw.VFSFile):

    def xSync(self, flags: int) -> None:  # noqa: N802
        if threading.get_ident() == _SyncCounter.caller:
            _SyncCounter.syncs += 1
        else:
            _SyncCounter.background += 1
        super().xSync(flags)


PAUSE_S = 0.5  # between store_batch calls in the paced sync count


def bench_store_batch(work: Path, batches: int, size: int,
                      source: Path | None = None) -> tuple[list[float], list[float], tuple[float, float, float]]:
    """`store_batch` of `size` facts into a store that keeps growing (from empty, or from a copy of the
    store in `source`), against one buffered write + fsync of the same bytes (what the batch appended),
    interleaved call by call; then the syncs one `store_batch` makes (journal fsyncs + SQLite syncs on the
    calling thread; and those of the background checkpointer), counted in a second pass through a
    counting VFS: calls back to back, then calls each after a pause (PAUSE_S)."""
    data = work / "store-batch"
    shutil.rmtree(data, ignore_errors=True)
    if source is not None:
        shutil.copytree(source, data)
        with cruxsql.open(data) as store:  # adopt the copied journal (a new inode) outside the timing
            store.counts()
    bare_path = work / "bare-batch.jsonl"
    ours: list[float] = []
    bare: list[float] = []

    def requests(round_: int) -> list[cruxsql.StoreRequest]:
        return [cruxsql.StoreRequest(f"svc{i % 300}", ("owner", "status", "region")[i % 3],
                                     f"deploy canary {round_} {i}", confidence=0.9) for i in range(size)]

    with cruxsql.open(data) as store:
        for round_ in range(batches):
            reqs = requests(round_)
            before = store.journal.stat().st_size if store.journal.stat() else 0
            started = time.perf_counter()
            store.store_batch(reqs)
            ours.append(time.perf_counter() - started)
            with open(store.journal.path, "rb") as fh:
                fh.seek(before)
                payload = fh.read()
            bare_path.unlink(missing_ok=True)
            started = time.perf_counter()
            with open(bare_path, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            bare.append(time.perf_counter() - started)
    counter = _SyncCounter()
    real_fsync = os.fsync
    fsyncs = 0

    def counting_fsync(fd: int) -> None:
        nonlocal fsyncs
        fsyncs += 1
        real_fsync(fd)

    os.fsync = counting_fsync
    try:
        with cruxsql.open(data) as store:
            calls = 3
            _SyncCounter.syncs = _SyncCounter.background = fsyncs = 0
            for round_ in range(calls):
                store.store_batch(requests(batches + round_))
            back_to_back = (fsyncs + _SyncCounter.syncs) / calls
            background = _SyncCounter.background / calls
            # an agent's pace: a batch per turn, with time between (the background checkpoint finishes)
            _SyncCounter.syncs = fsyncs = 0
            for round_ in range(calls):
                time.sleep(PAUSE_S)
                store.store_batch(requests(batches + calls + round_))
            syncs = (back_to_back, background, (fsyncs + _SyncCounter.syncs) / calls)
    finally:
        os.fsync = real_fsync
        counter.unregister()
    return ours, bare, syncs


def report_store_batch(source: Path, work: Path, batches: int, size: int) -> None:
    """`--store-batch-from DIR`: the store_batch rows alone, into a copy of the store built in DIR."""
    ours, bare, syncs = bench_store_batch(work, batches, size, source)
    with cruxsql.open(work / "store-batch") as store:
        facts = store.counts()["facts"]
    print(f"store_batch of {size:,} facts x {batches} into a copy of {source} (now {facts:,} facts), interleaved "
          f"with one buffered write + fsync of the same bytes; load average {os.getloadavg()[0]:.2f}")
    print(f"{'measure':<48}{'cruxsql':>14}{'baseline':>14}{'ratio':>10}")
    print_store_batch_rows(size, ours, bare, syncs)


def print_store_batch_rows(size: int, ours: list[float], bare: list[float],
                           syncs: tuple[float, float, float]) -> tuple[float, float]:
    """The store_batch throughput and sync rows; returns the median seconds of a call (ours, baseline)."""
    o, b = statistics.median(ours), statistics.median(bare)
    print(f"{f'store_batch of {size:,}, facts/s (vs write+fsync)':<48}{size / o:>14,.0f}{size / b:>14,.0f}{b / o:>10.3f}")
    print(f"{'syncs in a store_batch call (journal + SQLite)':<48}{syncs[0]:>14.1f}")
    print(f"{f'  in a call after a {PAUSE_S:g} s pause':<48}{syncs[2]:>14.1f}")
    print(f"{'syncs per store_batch, background checkpointer':<48}{syncs[1]:>14.1f}")
    return o, b


def bench_open_and_query(data: Path, repeats: int = 7) -> tuple[float, int]:
    times = []
    rows = 0
    for _ in range(repeats):
        started = time.perf_counter()
        with cruxsql.open(data) as store:
            db_path = store.data_dir / "cruxsql.db"
        _, result = run_readonly_query(
            db_path, "SELECT entity, key, value FROM live_facts WHERE tenant_hash = 'tenant1' AND entity = 'svc42'")
        rows = len(result)
        times.append(time.perf_counter() - started)
    return statistics.median(times), rows


def report_store_latency(data: Path, work: Path, n: int, pause_s: float = 0.0) -> None:
    """`--store-latency-only DIR`: the store() rows alone, into a store an earlier run built (and adopted
    when copied), so they can be re-measured without a rebuild."""
    ours, bare = bench_store_latency(data, work, n, pause_s)
    paced = f", each pair after a {pause_s * 1000:g} ms pause" if pause_s else ""
    print(f"store() into {data} ({n} stores, interleaved with a bare append + fsync of the same line{paced}; "
          f"load average {os.getloadavg()[0]:.2f})")
    print(f"{'measure':<44}{'cruxsql':>14}{'baseline':>14}{'ratio':>10}")
    for p in (50, 95, 99):
        o, b = percentile(ours, p), percentile(bare, p)
        print(f"{f'store() latency p{p}, ms (vs write+fsync)':<44}{o * 1000:>14.3f}{b * 1000:>14.3f}{o / b:>10.2f}")


def report_rebuild_vs(journal: Path, work: Path, checkout: Path, rounds: int) -> None:
    """A full rebuild of `journal` by this checkout's cruxsql and by `checkout`'s, alternately, each in a
    fresh process and each beside `json.loads` of the same lines in that process (the machine's noise
    moves both sides of a ratio together)."""
    here = Path(__file__).resolve().parents[2]
    print(f"{'rebuild of ' + format(sum(1 for _ in open(journal, 'rb')), ',') + ' events':<28}{'s':>8}"
          f"{'events/s':>12}{'json.loads/s':>14}{'ratio':>8}{'RSS growth MiB':>16}{'then 1st query s':>18}")
    for _ in range(rounds):
        for name, code in (("this checkout", here), ("--rebuild-vs", checkout.resolve())):
            done = subprocess.run([sys.executable, __file__, "--rebuild-child", str(journal), str(work / "rebuild-vs")],
                                  env={**os.environ, "PYTHONPATH": str(code)}, capture_output=True, text=True,
                                  check=True)
            r = json.loads(done.stdout.splitlines()[-1])
            name = f"{name} ({Path(r['code']).parents[1].name})"
            print(f"{name:<28}{r['rebuild_s']:>8.1f}{r['events'] / r['rebuild_s']:>12,.0f}"
                  f"{r['events'] / r['parse_s']:>14,.0f}{r['parse_s'] / r['rebuild_s']:>8.3f}"
                  f"{r['rss_growth_mib']:>16.0f}{r['first_query_s']:>18.2f}")


def report_compare(journal: Path, work: Path, commits: list[str], rounds: int, stores: int, bursts: int,
                   burst: int) -> dict:
    """This code and each of `commits` (extracted by `code_of_commit`), alternately for `rounds` rounds,
    each in a fresh process on its own copy of `journal` (its own view, rebuilt before the timing): store()
    p50/p95 beside a bare append + fsync measured call by call in the same process, and the first recall
    after bursts of single writes. The ratios to the first commit are of p50s measured in the same round."""
    here = Path(__file__).resolve().parents[2]
    codes = [("this checkout", here)] + [(c, code_of_commit(c, work)) for c in commits]
    rows: list[dict] = []
    for round_ in range(rounds):
        for name, code in codes:
            data = work / f"compare-{len(rows)}"
            shutil.rmtree(data, ignore_errors=True)
            data.mkdir(parents=True)
            shutil.copy(journal, data / "facts.jsonl")
            done = subprocess.run(
                [sys.executable, str(Path(__file__).with_name("store_latency.py")), str(data), str(work), str(stores),
                 str(bursts), str(burst)],
                env={**os.environ, "PYTHONPATH": str(code)}, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"{name}: the child failed:\n{done.stderr}")
            shutil.rmtree(data, ignore_errors=True)
            rows.append({"round": round_, "name": name, **json.loads(done.stdout.splitlines()[-1])})
    print(f"store() into {journal.name} ({stores} stores per run, interleaved with a bare append + fsync; "
          f"first recall after each of {bursts} bursts of {burst} single writes; load average "
          f"{os.getloadavg()[0]:.2f})")
    print(f"{'round':<7}{'code':<16}{'store p50 ms':>13}{'p95':>8}{'bare p50':>10}{'x bare':>8}"
          f"{'x ' + (commits[0] if commits else 'itself'):>14}{'recall p50 ms':>15}{'p95':>8}")
    for row in rows:
        p50, bare = percentile(row["store_ms"], 50), percentile(row["bare_ms"], 50)
        first = next(r for r in rows if r["round"] == row["round"] and r["name"] == (commits[0] if commits
                                                                                   else "this checkout"))
        recall = row.get("recall_after_burst_ms")
        print(f"{row['round']:<7}{row['name']:<16}{p50:>13.3f}{percentile(row['store_ms'], 95):>8.3f}{bare:>10.3f}"
              f"{p50 / bare:>8.2f}{p50 / percentile(first['store_ms'], 50):>14.2f}"
              + (f"{percentile(recall, 50):>15.1f}{percentile(recall, 95):>8.1f}" if recall else ""))
    return {"journal": journal.name, "rows": rows}


def _decoder_of(checkout: Path):
    """`checkout`'s bulk decoder (`line_decoder.py`, or `bulk.py` in a checkout from before it had its own
    module), loaded beside this one (its relative imports bind to this cruxsql.facts: it shares the codec
    and the timestamps), as one line's full judgement: fast path, else the codec."""
    source = checkout / "cruxsql/facts/line_decoder.py"
    if not source.is_file():
        source = checkout / "cruxsql/facts/bulk.py"
    spec = importlib.util.spec_from_file_location("cruxsql.facts._bulk_vs", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "cruxsql.facts"
    sys.modules[spec.name] = module  # msgspec resolves the Structs' annotations through it
    spec.loader.exec_module(module)
    return _judged(module)


def _judged(module):
    def decode(raw: bytes) -> object:
        try:
            try:
                return module.decode_fast(raw)
            except module._Slow:
                return codec.decode_event(raw)
        except codec.CorruptLine:
            return None
    return decode


def report_decoders(journal: Path, checkout: Path, rounds: int) -> None:
    """`--decoders-vs`: every line of `journal` decoded by each decoder in turn, in one process, rounds
    interleaved: json.loads (the baseline), the compiled decoders untyped (orjson only if
    importable), and the bulk path's full judgement (fast path, else the codec) by this checkout and by
    CHECKOUT's."""
    import msgspec
    lines = [line.rstrip(b"\n") for line in open(journal, "rb")]
    decoders: dict[str, object] = {"json.loads": json.loads, "msgspec.json.decode (untyped)": msgspec.json.decode}
    try:
        import orjson  # type: ignore[import-not-found]  # not a dependency: measured when present
        decoders["orjson.loads (untyped)"] = orjson.loads
    except ImportError:
        print("(orjson not importable: its row is left out)")
    decoders["bulk decoder, this checkout"] = _judged(line_decoder)
    decoders[f"bulk decoder, {checkout}"] = _decoder_of(checkout.resolve())
    # each decoder in turn on one chunk of lines, then the next chunk: the machine's load changes the
    # decoders' times alike; a decoder's time is the sum over chunks of its best round on each
    chunks = [lines[i:i + 20_000] for i in range(0, len(lines), 20_000)]
    best = {name: [float("inf")] * len(chunks) for name in decoders}
    for _ in range(rounds):
        for c, chunk in enumerate(chunks):
            for name, decode in decoders.items():
                started = time.perf_counter()
                for raw in chunk:
                    decode(raw)  # type: ignore[operator]
                best[name][c] = min(best[name][c], time.perf_counter() - started)
    print(f"{len(lines):,} lines of {journal}, each decoder's best of {rounds} interleaved rounds per 20,000 lines")
    print(f"{'decoder':<56}{'lines/s':>12}{'vs json.loads':>15}")
    totals = {name: sum(times) for name, times in best.items()}
    for name, seconds in totals.items():
        print(f"{name:<56}{len(lines) / seconds:>12,.0f}{totals['json.loads'] / seconds:>15.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--events-10m", action="store_true",
                        help="only the rebuild (and parse baseline) of a 10,000,000-event journal: time and peak memory")
    parser.add_argument("--stores", type=int, default=300, help="store() calls for the latency figure")
    parser.add_argument("--pause-ms", type=float, default=0.0,
                        help="with --store-latency-only: a pause before each store() (an agent's pace)")
    parser.add_argument("--batches", type=int, default=20, help="store_batch calls of --batch-size facts")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--row-path-events", type=int, default=100_000,
                        help="events rebuilt by both the bulk and the row-by-row path, side by side (0: skip)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "cruxsql-bench-facts")
    parser.add_argument("--json-dir", type=Path, default=Path(__file__).resolve().parent / "out",
                        help="where the figures are also written, as facts-<events>.json (default: tools/bench/out)")
    parser.add_argument("--store-latency-only", type=Path, metavar="DATA_DIR",
                        help="only the store() latency rows, into the store already built in DATA_DIR")
    parser.add_argument("--store-batch-from", type=Path, metavar="DATA_DIR",
                        help="only the store_batch rows, into a copy of the store built in DATA_DIR")
    parser.add_argument("--rebuild-vs", type=Path, metavar="CHECKOUT",
                        help="only the rebuild of --events, by this code and by CHECKOUT's alternately (before/after)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of --rebuild-vs or --decoders-vs")
    parser.add_argument("--decoders-vs", type=Path, metavar="CHECKOUT",
                        help="only the decoders: json.loads, msgspec, orjson (if importable), the bulk path's "
                             "decoder of this code and of CHECKOUT's, side by side in this process")
    parser.add_argument("--floor-only", action="store_true",
                        help="only the json parse of --events and the rebuild's floor: the Crux-exact decode of "
                             "every line, then the insert of the fewest rows a view holds into tables without "
                             "any index (no replay rule, no derived table)")
    parser.add_argument("--compare", action="append", default=[], metavar="COMMIT",
                        help="only store() and the first recall after bursts of single writes into a store of "
                             "--events: this code and COMMIT's (repeatable), each run in a subprocess from a "
                             "`git archive` of the commit, alternately for --rounds rounds")
    parser.add_argument("--bursts", type=int, default=20, help="with --compare: bursts of single writes")
    parser.add_argument("--burst", type=int, default=1000, help="with --compare: single writes per burst")
    parser.add_argument("--rebuild-child", nargs=2, type=Path, metavar=("JOURNAL", "WORKDIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pause_ms < 0:
        parser.error(f"--pause-ms must be 0 or more, not {args.pause_ms:g}")
    if args.events < 1:
        parser.error(f"--events must be 1 or more, not {args.events}")
    if args.floor_only and (args.rebuild_vs or args.store_latency_only or args.store_batch_from):
        parser.error("--floor-only cannot be combined with --rebuild-vs, --store-latency-only or --store-batch-from")
    if args.rebuild_child:  # one side of --rebuild-vs, with the cruxsql its PYTHONPATH names
        rebuild_s, data, events, rss_growth = bench_rebuild(*args.rebuild_child)
        print(json.dumps({"events": events, "rebuild_s": rebuild_s, "first_query_s": first_query(data),
                          "parse_s": bench_parse(args.rebuild_child[0]), "rss_growth_mib": rss_growth,
                          "code": cruxsql.__file__}))
        return
    work: Path = args.workdir
    for flag, folder in (("--workdir", work), ("--json-dir", args.json_dir)):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"{flag} {folder}: {exc.strerror or exc}")
    if args.store_batch_from:
        report_store_batch(args.store_batch_from, work, args.batches, args.batch_size)
        return
    if args.store_latency_only:
        report_store_latency(args.store_latency_only, work, args.stores, args.pause_ms / 1000)
        return
    if args.events_10m:
        args.events = 10_000_000
    journal = work / f"journal-{args.events}.jsonl"
    if not journal.exists():
        started = time.perf_counter()
        generate(journal, args.events)
        print(f"generated {args.events:,} events ({journal.stat().st_size / 2**20:.0f} MiB) "
              f"in {time.perf_counter() - started:.1f}s")

    if args.rebuild_vs:
        report_rebuild_vs(journal, work, args.rebuild_vs, args.rounds)
        return
    if args.compare:
        compared = report_compare(journal, work, args.compare, args.rounds, args.stores, args.bursts, args.burst)
        (args.json_dir / f"facts-compare-{args.events}.json").write_text(json.dumps(compared, indent=2) + "\n")
        return
    if args.decoders_vs:
        report_decoders(journal, args.decoders_vs, args.rounds)
        return
    parse_s = bench_parse(journal)
    if args.floor_only:
        decode_s, insert_s, events = bench_floor(journal, work)
        print(f"{'measure':<48}{'floor':>14}{'json parse':>14}{'ratio':>10}")
        print_floor_rows(events, parse_s, decode_s, insert_s)
        return
    rebuild_s, data, events, rss_growth = bench_rebuild(journal, work)
    open_s, rows = bench_open_and_query(data)
    summary: dict = {"events": events, "rebuild_s": rebuild_s, "parse_s": parse_s, "rebuild_peak_rss_growth_mib":
                     rss_growth, "open_query_s": open_s, "query_rows": rows}

    print(f"\njournal: {events:,} events, {journal.stat().st_size / 2**20:.0f} MiB")
    print(f"{'measure':<48}{'cruxsql':>14}{'baseline':>14}{'ratio':>10}")
    print(f"{'rebuild throughput, events/s (vs json parse)':<48}{events / rebuild_s:>14,.0f}"
          f"{events / parse_s:>14,.0f}{parse_s / rebuild_s:>10.3f}")
    print(f"{'rebuild time, s; peak RSS growth, MiB':<48}{rebuild_s:>14.1f}{rss_growth:>14.0f}")
    print(f"{'open + 1 SQL query, s (vs full rebuild)':<48}{open_s:>14.4f}{rebuild_s:>14.2f}"
          f"{rebuild_s / open_s:>9.0f}x")
    if not args.events_10m:
        decode_s, insert_s, _ = bench_floor(journal, work)  # after the rebuild: its peak RSS is its own
        print_floor_rows(events, parse_s, decode_s, insert_s)
        summary.update(floor_decode_s=decode_s, floor_insert_s=insert_s)
        if args.row_path_events:
            bulk_s, rows_s, n = bench_rebuild_paths(journal, work, min(args.row_path_events, events))
            print(f"{f'rebuild of {n:,} events, s (vs row-by-row path)':<48}{bulk_s:>14.2f}{rows_s:>14.2f}"
                  f"{rows_s / bulk_s:>9.1f}x")
            summary.update(paths_events=n, paths_bulk_s=bulk_s, paths_rows_s=rows_s)
        ours, bare = bench_store_latency(data, work, args.stores)
        for p in (50, 95):
            o, b = percentile(ours, p), percentile(bare, p)
            print(f"{f'store() latency p{p}, ms (vs write+fsync)':<48}{o * 1000:>14.3f}{b * 1000:>14.3f}{o / b:>10.2f}")
        batch_ours, batch_bare, syncs = bench_store_batch(work, args.batches, args.batch_size)
        o, b = print_store_batch_rows(args.batch_size, batch_ours, batch_bare, syncs)
        summary.update(
            store_p50_ms=percentile(ours, 50) * 1000, store_p95_ms=percentile(ours, 95) * 1000,
            bare_p50_ms=percentile(bare, 50) * 1000, bare_p95_ms=percentile(bare, 95) * 1000,
            store_batch_facts_per_s=args.batch_size / o, store_batch_bare_facts_per_s=args.batch_size / b,
            store_batch_syncs=syncs[0], store_batch_background_syncs=syncs[1])
    summary["measured_at"] = timestamps.format_event_time(timestamps.now_ns())
    (args.json_dir / f"facts-{events}.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
