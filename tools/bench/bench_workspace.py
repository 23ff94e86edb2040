"""Benchmark of the workspace verbs (workspace retrieval for coding agents): tokens saved against full reads, index times,
and a name-the-file recall check, on this repository and on a real sdist nobody here wrote.

    python tools/bench/bench_workspace.py [--sdist-dir DIR] [--verbose]

* Workspaces: this repository; attrs 26.1.0 from PyPI (`pip download --no-binary :all: --no-deps
  attrs==26.1.0`, extracted into a temp dir; --sdist-dir reuses an extracted copy), which has Python code and
  markdown docs; and, for the read figures only, the corpus a published pilot of these verbs measured: the
  packages asyncio, email, http, json, logging, importlib and unittest copied from the running Python's
  standard library (112 code files, ≈442.5k tokens on CPython 3.11, as the pilot counted).
* Tokens: every figure is counted twice, with the workspace estimator max(words × 1.3, chars / 4)
  (what the verbs print and the ledger records, and what the pilot used) and, when the
  `bench` extra is installed (`pip install -e '.[bench]'`: quicktok, an exact tiktoken-compatible BPE), with
  o200k_base, the tokenizer codedb and lean-ctx measured with. The baseline of every token figure is a full
  read of the same files, counted the same way in the same process.
* ctx_read: mode=signatures and mode=map on every .py code file vs reading it whole (seed: −91%, outline
  vs read; the pilot's signatures view was 8.6% of the whole on its corpus), and mode=auto (the default
  table: small files whole) for what an agent gets by default.
* ctx_doc, the pilot's way: markdown files ≥ 2 KB, CHANGELOGs excluded. --outline vs reading the file whole;
  --section for every heading of those files (`--section L<line>`, the reply as an agent gets it: header,
  section, subsection lines, neighbours). Figures: the pilot's statistic, median doc / median section reply
  (pilot: ≈1,491 / ≈131 tok; seed: sections 12–53× smaller), beside the same statistic for the bare text of
  each section (heading to next heading, no header or navigation lines: the most any section reply could
  save); per doc, whole / its median section reply (min·q1·median·q3·max); and the sum of the docs over the
  sum of their median sections.
* ctx_search: the 30 identifier queries below (content mode, first page) vs reading the files the page
  points to (seed: −98%, symbol search vs read).
* Recall: for the same 30 queries, written down before the first run, the defining file must be in the
  top 3 of the ranking (goal ≥ 90%).
* Times: a fresh index build against the floor any index pays (read + SHA-256 of the same files), and
  incremental reindex with nothing changed / one file touched / one file edited.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import sysconfig
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from cruxsql.workspace import Workspace  # noqa: E402
from cruxsql.workspace.budget import estimate_tokens  # noqa: E402
from cruxsql.workspace.markdown import sections  # noqa: E402

SDIST = "attrs==26.1.0"
SEED = {"signatures": "−91%", "search": "−98%", "sections": "12–53×"}
PILOT_PACKAGES = ("asyncio", "email", "http", "json", "logging", "importlib", "unittest")

# Written down before the first run: identifier → the file that defines it.
REPO_QUERIES = {
    "index_segment": "cruxsql/documents/postings.py", "Bm25Corpus": "cruxsql/documents/bm25.py",
    "split_words": "cruxsql/documents/analyzer.py", "decode_tfs": "cruxsql/documents/postings.py",
    "scan_within_budget": "cruxsql/documents/response_shapes.py", "ExpandedChunk": "cruxsql/documents/response_shapes.py",
    "rust_trim": "cruxsql/documents/chunking.py", "segments_dir": "cruxsql/documents/segments.py",
    "ChunkRecord": "cruxsql/documents/segments.py", "DocumentInput": "cruxsql/documents/ingest.py",
    "read_checkpoint": "cruxsql/facts/replay_position.py", "fsync_dir": "cruxsql/facts/files.py",
    "PrivacyPolicy": "cruxsql/facts/privacy.py", "parse_ns": "cruxsql/facts/timestamps.py",
    "check_confidence": "cruxsql/facts/store.py", "ClearSupersedeEvent": "cruxsql/facts/codec.py",
    "format_f32": "cruxsql/facts/codec.py", "estimate_tokens_str": "cruxsql/recall/tokens.py",
    "legacy_fill": "cruxsql/recall/tokens.py", "salience_factor": "cruxsql/recall/freshness.py",
    "normalize_tenant": "cruxsql/recall/scope.py", "Timeline": "cruxsql/recall/timeline.py",
    "tool_output_catalogue": "cruxsql/recall/crc_v1.py", "report_hash": "cruxsql/governance/erasure_proof.py",
    "needles_for": "cruxsql/governance/erasure_scan.py", "LegalHoldBlocked": "cruxsql/governance/compaction.py",
    "build_override_receipt": "cruxsql/governance/legal_holds.py",
    "iter_audit_events": "cruxsql/governance/audit_export.py", "progress_callback": "cruxsql/cli/common.py",
    "run_readonly_query": "cruxsql/console/readonly_sql.py",
}
ATTRS_QUERIES = {
    "cmp_using": "src/attr/_cmp.py", "get_generic_base": "src/attr/_compat.py",
    "set_run_validators": "src/attr/_config.py", "resolve_types": "src/attr/_funcs.py",
    "assoc": "src/attr/_funcs.py", "has": "src/attr/_funcs.py", "evolve": "src/attr/_make.py",
    "_ClassBuilder": "src/attr/_make.py", "_transform_attrs": "src/attr/_make.py",
    "make_class": "src/attr/_make.py", "_CountingAttr": "src/attr/_make.py", "fields_dict": "src/attr/_make.py",
    "_make_init_script": "src/attr/_make.py", "Factory": "src/attr/_make.py", "define": "src/attr/_next_gen.py",
    "inspect": "src/attr/_next_gen.py", "VersionInfo": "src/attr/_version_info.py",
    "default_if_none": "src/attr/converters.py", "to_bool": "src/attr/converters.py",
    "FrozenInstanceError": "src/attr/exceptions.py", "NotAnAttrsClassError": "src/attr/exceptions.py",
    "DefaultAlreadySetError": "src/attr/exceptions.py", "_split_what": "src/attr/filters.py",
    "instance_of": "src/attr/validators.py", "_MatchesReValidator": "src/attr/validators.py",
    "set_disabled": "src/attr/validators.py", "frozen": "src/attr/setters.py",
    "AttrsInstance": "src/attr/__init__.py", "_AnnotationExtractor": "src/attr/_compat.py",
    "_CacheHashWrapper": "src/attr/_make.py",
}


class Counters:
    """Token counters: the workspace estimator always, o200k_base when quicktok is installed."""

    def __init__(self) -> None:
        self.names = ["est"]
        self.o200k = None
        try:
            import quicktok
        except ImportError:
            print("(o200k_base column skipped: pip install -e '.[bench]' adds it)")
        else:
            self.o200k = quicktok.get_encoding("o200k_base")
            self.names.append("o200k")

    def count(self, text: str) -> dict[str, int]:
        counts = {"est": estimate_tokens(text)}
        if self.o200k is not None:
            counts["o200k"] = len(self.o200k.encode(text))
        return counts


def pilot_corpus(target: Path) -> Path:
    """The seed's pilot corpus: seven packages of the running Python's standard library."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for package in PILOT_PACKAGES:
        shutil.copytree(stdlib / package, target / package, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def fetch_sdist(target: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps", SDIST,
                    "-d", str(target)], check=True, capture_output=True)
    archive = next(target.glob("*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return next(p for p in target.iterdir() if p.is_dir())


def pct(ours: int, base: int) -> str:
    return f"{(ours - base) / base * 100:+.1f}%" if base else "-"


def row(label: str, ours: str, base: str, ratio: str, seed: str = "") -> None:
    print(f"  {label:<58} {ours:>22} {base:>10} {ratio:>8} {seed:>7}")


def read_figures(ws: Workspace, root: Path, counters: Counters, s: str) -> dict[str, float]:
    """ctx_read in each summary mode over every .py code file, against reading the same files whole."""
    results: dict[str, float] = {}
    code = [p for (p,) in ws.db.execute("SELECT path FROM files WHERE path LIKE '%.py' AND path_class='code' "
                                         "ORDER BY path")]
    whole = {rel: counters.count((root / rel).read_text(encoding="utf-8")) for rel in code}
    for mode in ("signatures", "map", "auto"):
        for name in counters.names:
            spent = full = 0
            per_file = []
            for rel in code:
                tokens = counters.count(ws.call(s, "ctx_read", path=rel, mode=mode).text)[name]
                spent += tokens
                full += whole[rel][name]
                per_file.append(tokens / max(1, whole[rel][name]))
            row(f"ctx_read mode={mode} ({len(code)} .py files) [{name}]", f"{spent:,}", f"{full:,}",
                pct(spent, full), SEED["signatures"] if mode != "auto" else "")
            row(f"  median per file ({mode}) [{name}]", f"{statistics.median(per_file):.1%}", "100%", "", "")
            results[f"{mode}:{name}"] = (spent - full) / full
    return results


def doc_figures(ws: Workspace, root: Path, counters: Counters, s: str, verbose: bool) -> dict[str, float]:
    """ctx_doc --outline and --section on markdown files ≥ 2 KB (CHANGELOGs excluded, as the pilot did)."""
    results: dict[str, float] = {}
    docs = [p for (p,) in ws.db.execute("SELECT path FROM files WHERE lang='markdown' AND bytes >= 2048 "
                                        "ORDER BY path") if "changelog" not in Path(p).stem.lower()]
    if not docs:
        return results
    for name in counters.names:
        outline_sum = docs_full = median_sum = 0
        doc_sizes, section_sizes, bare_sizes, ratios = [], [], [], []
        for rel in docs:
            text = (root / rel).read_text(encoding="utf-8")
            whole = counters.count(text)[name]
            docs_full += whole
            doc_sizes.append(whole)
            lines = text.splitlines()
            bare_sizes += [counters.count("\n".join(lines[sec.start - 1:sec.end]))[name] for sec in sections(text)]
            outline_sum += counters.count(ws.call(s, "ctx_doc", path=rel, view="outline").text)[name]
            replies = sorted(counters.count(ws.call(s, "ctx_doc", path=rel, view="section",
                                                    pattern=f"L{sec.start}").text)[name] for sec in sections(text))
            if not replies:
                continue
            section_sizes += replies
            median = replies[len(replies) // 2]
            median_sum += median
            ratios.append(whole / median)
            if verbose:
                print(f"    {rel}: {whole:,} tok [{name}], {len(replies)} sections, replies "
                      f"{replies[0]:,}–{replies[-1]:,}, median {median:,} → {ratios[-1]:.1f}x")
        row(f"ctx_doc --outline ({len(docs)} .md ≥ 2 KB) [{name}]", f"{outline_sum:,}", f"{docs_full:,}",
            pct(outline_sum, docs_full), "")
        pooled = statistics.median(doc_sizes) / statistics.median(section_sizes)
        row(f"ctx_doc --section, median doc / median section [{name}]",
            f"{statistics.median(section_sizes):,.0f}", f"{statistics.median(doc_sizes):,.0f}", f"{pooled:.1f}x",
            SEED["sections"])
        bare = statistics.median(doc_sizes) / statistics.median(bare_sizes)
        row(f"  the same with bare section text, no reply framing [{name}]",
            f"{statistics.median(bare_sizes):,.0f}", f"{statistics.median(doc_sizes):,.0f}", f"{bare:.1f}x", "")
        ratios.sort()
        quart = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        row(f"  per doc whole / median section [{name}]", f"{ratios[0]:.1f}·{quart[0]:.1f}·{quart[1]:.1f}·"
            f"{quart[2]:.1f}·{ratios[-1]:.1f}x", "", "", "")
        row(f"  sum of docs / sum of median sections [{name}]", f"{median_sum:,}", f"{docs_full:,}",
            f"{docs_full / max(1, median_sum):.1f}x", "")
        results[f"sections:{name}"] = pooled
    return results


def bench(name: str, root: Path, queries: dict[str, str], data: Path, counters: Counters,
          verbose: bool = False) -> dict[str, float]:
    print(f"\n== {name}: {root}")
    row("figure", "ctx verbs", "full read", "ratio", "seed")
    with Workspace(data) as ws:
        started = time.perf_counter()
        report = ws.index(root)
        build = time.perf_counter() - started
        files = [p for (p,) in ws.db.execute("SELECT path FROM files ORDER BY path")]
        started = time.perf_counter()
        for rel in files:
            hashlib.sha256((root / rel).read_bytes()).hexdigest()
        floor = time.perf_counter() - started
        s = "session-bench"
        results = read_figures(ws, root, counters, s)
        if not queries:
            return results
        results |= doc_figures(ws, root, counters, s, verbose)
        code = [p for (p,) in ws.db.execute("SELECT path FROM files WHERE path LIKE '%.py' AND path_class='code' "
                                             "ORDER BY path")]

        found_top3 = 0
        search_sums = {name: 0 for name in counters.names}
        pointed_sums = {name: 0 for name in counters.names}
        misses = []
        for query, expected in queries.items():
            paths = ws.call(s, "ctx_search", query=query, mode="paths").data["files"]
            top = [f["path"] for f in paths[:3]]
            if expected in top:
                found_top3 += 1
            else:
                misses.append(f"{query} → {top}")
            reply = ws.call(s, "ctx_search", query=query)
            pointed = [counters.count((root / p).read_text(encoding="utf-8")) for p in reply.files]
            for name, tokens in counters.count(reply.text).items():
                search_sums[name] += tokens
                pointed_sums[name] += sum(c[name] for c in pointed)
        for name in counters.names:
            row(f"ctx_search, first page ({len(queries)} queries) [{name}]", f"{search_sums[name]:,}",
                f"{pointed_sums[name]:,}", pct(search_sums[name], pointed_sums[name]), SEED["search"])
            results[f"search:{name}"] = (search_sums[name] - pointed_sums[name]) / pointed_sums[name]
        row("recall: defining file in top 3", f"{found_top3}/{len(queries)}", "", f"{found_top3 / len(queries):.0%}",
            "≥90%")
        for miss in misses:
            print(f"    miss: {miss}")
        results["recall"] = found_top3 / len(queries)

        row(f"index build ({report.files} files)", f"{build:.2f}s", f"{floor:.3f}s", f"{build / floor:.0f}x", "")
        started = time.perf_counter()
        again = ws.index(root)
        idle = time.perf_counter() - started
        row("reindex, nothing changed", f"{idle:.3f}s", f"{build:.2f}s", f"{idle / build:.2f}x", "")
        assert again.unchanged == report.files
        target = root / (code[len(code) // 2])
        original = target.read_bytes()
        stat = target.stat()
        try:
            import os
            os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
            started = time.perf_counter()
            touched = ws.index(root)
            row("reindex, one file touched (same hash)", f"{time.perf_counter() - started:.3f}s", f"{build:.2f}s", "", "")
            assert touched.rehashed_unchanged == 1
            target.write_bytes(original + b"\n# edited by bench_workspace\n")
            started = time.perf_counter()
            edited = ws.index(root)
            row("reindex, one file edited", f"{time.perf_counter() - started:.3f}s", f"{build:.2f}s", "", "")
            assert edited.changed == 1
        finally:
            target.write_bytes(original)
            os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        savings = ws.db.execute("SELECT calls, returned_tokens, full_read_tokens, saved_share FROM ledger_savings "
                                "WHERE session=?", (s,)).fetchone()
        print(f"  ledger ({s}): {savings[0]} calls, {savings[1]:,} tok returned vs {savings[2]:,} tok of full "
              f"reads (saved {savings[3]:.1%})")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sdist-dir", type=Path, help="An extracted attrs sdist to reuse instead of downloading.")
    parser.add_argument("--verbose", action="store_true", help="One line per markdown file measured.")
    args = parser.parse_args()
    counters = Counters()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        sdist = args.sdist_dir or fetch_sdist(tmp_path / "sdist")
        bench("this repository", REPO, REPO_QUERIES, tmp_path / "data-repo", counters, args.verbose)
        bench(f"{SDIST} (PyPI sdist)", sdist, ATTRS_QUERIES, tmp_path / "data-sdist", counters, args.verbose)
        stdlib = pilot_corpus(tmp_path / "pilot")
        bench(f"the seed's pilot corpus (Python {sys.version.split()[0]} stdlib: {', '.join(PILOT_PACKAGES)})",
              stdlib, {}, tmp_path / "data-pilot", counters, args.verbose)


if __name__ == "__main__":
    main()
