"""The planted breaks: each a realistic defect in one mechanism the docs promise, and the tests that must
catch it. A break is an exact text substitution whose anchor must occur exactly once in its file, so a
change to the code around it makes the break fail loudly by name instead of planting nothing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Break:
    name: str
    what: str
    path: str                 # relative to the repository root
    anchor: str               # exact text, present exactly once in `path`
    replacement: str
    tests: tuple[str, ...]    # pytest paths or node ids (relative to the repository root)

    def plant(self, source: str) -> str:
        """`source` with the break planted; ValueError naming the break when its anchor is not there once."""
        found = source.count(self.anchor)
        if found != 1:
            raise ValueError(f"{self.name}: the anchor occurs {found} times in {self.path} (expected once): "
                             f"{self.anchor.strip().splitlines()[0]!r}")
        return source.replace(self.anchor, self.replacement)


def _identity_from_argument(name: str, field: str) -> str:
    other = "identity.tenant" if field == "agent" else "identity.agent"
    args = f"arguments.pop({name!r}), {other}" if field == "agent" else f"{other}, arguments.pop({name!r})"
    return ("        self._start_indexing()\n"
            f"        if {name!r} in arguments:  # planted: the identity taken from a tool argument\n"
            "            arguments = dict(arguments)\n"
            f"            identity = Identity({args})\n")


_SCAN_FILES = "        if not path.is_file() or path.is_symlink():\n"
_VIEW_SUPERSEDE = ("            db.execute(\"UPDATE facts SET superseded_by = ? WHERE fact_id = ?\", "
                   "(event.by_fact_id, event.fact_id))\n")

BREAKS: tuple[Break, ...] = (
    Break("journal-fsync", "a journal append is acknowledged without its fsync",
          "cruxsql/facts/journal.py",
          "os.fsync(fd)  # durability of the event: acknowledged only after this returns",
          "pass  # planted: no fsync",
          ("tests/facts/test_write_path.py::test_nothing_is_visible_in_the_view_until_the_journal_fsync_returns",)),
    Break("directory-fsync", "creating facts.jsonl does not fsync the directory",
          "cruxsql/facts/journal.py",
          "            if created:\n                fsync_dir(self.data_dir)  # the new journal's name",
          "            if False:  # planted\n                fsync_dir(self.data_dir)  # the new journal's name",
          ("tests/facts/test_journal_durability.py",)),
    Break("supersession-replay", "replay skips a `supersede` line",
          "cruxsql/facts/view.py", _VIEW_SUPERSEDE, "            pass  # planted: supersede not applied\n",
          ("tests/facts/test_view_replay.py", "tests/facts/test_store.py")),
    Break("tenant-scope", "query_facts reads every tenant's facts",
          "cruxsql/recall/visibility.py",
          'plan.where.append("+f.tenant_hash = :tenant")  # never drive the plan from the tenant',
          'plan.where.append(":tenant = :tenant")  # planted: no tenant filter',
          ("tests/recall/test_scope.py",)),
    Break("agent-scope", "query_facts shows every agent's private facts",
          "cruxsql/recall/visibility.py",
          'plan.where.append("((t.owner IS NULL AND f.private = 0) OR t.owner = :agent)")',
          'plan.where.append("((t.owner IS NULL AND f.private = 0) OR t.owner IS NOT NULL)")',
          ("tests/recall/test_scope.py",)),
    Break("sql-sandbox", "the console runs a statement that is not read-only (VACUUM INTO)",
          "cruxsql/console/readonly_sql.py",
          "        if not details.is_readonly:  # VACUUM asks the authorizer only when it runs",
          "        if False:  # planted",
          ("tests/console/test_sql_console.py::test_refused_statements_say_read_only_and_leave_every_file_alone",
           "tests/console/test_sql_console.py::test_turning_query_only_off_before_a_vacuum_into_is_refused_before_anything_runs")),
    Break("sql-attach", "the console lets ATTACH through",
          "cruxsql/console/readonly_sql.py",
          "        elif action == apsw.SQLITE_ATTACH:\n",
          "        elif action == apsw.SQLITE_ATTACH:\n            return apsw.SQLITE_OK  # planted\n",
          ("tests/console/test_sql_attach.py",)),
    Break("torn-tail-quarantine", "opening a store leaves a torn last line in the journal",
          "cruxsql/facts/store.py",
          "        torn = self.journal.repair_torn_tail()\n",
          "        torn = None  # planted: no quarantine\n",
          ("tests/facts/test_journal.py",)),
    Break("legal-hold-guard", "compaction erases facts under an active legal hold",
          "cruxsql/governance/compaction.py",
          "            if covered:\n                hold_ids = sorted(",
          "            if False:  # planted\n                hold_ids = sorted(",
          ("tests/governance/test_legal_holds.py",)),
    Break("bm25-idf", "BM25's idf loses its +1 (Lucene's form)",
          "cruxsql/documents/bm25.py",
          "ratio = (n - d + F32(0.5)) / (d + F32(0.5)) + F32(1.0)",
          "ratio = (n - d + F32(0.5)) / (d + F32(0.5))  # planted",
          ("tests/documents/test_bm25.py",)),
    Break("bootstrap-budget", "get_bootstrap ignores its token_budget",
          "cruxsql/recall/facade.py",
          "n = tokens.legacy_fill([r[7] for r in ranked], token_budget) if token_budget is not None else len(ranked)",
          "n = len(ranked)  # planted: the budget ignored",
          ("tests/mcp/test_bootstrap_budget.py",
           "tests/recall/test_scope.py::test_get_bootstrap_budget_tenant_visibility")),
    Break("backup-checksum", "restore accepts a member whose size matches but whose checksum does not",
          "cruxsql/governance/backup.py",
          'if size != entry["bytes"] or hasher.hexdigest() != entry["blake3"]:',
          'if size != entry["bytes"]:  # planted: checksum not compared',
          ("tests/governance/test_backup.py::test_a_flipped_byte_is_refused_and_nothing_is_written",)),
    Break("one-write-per-mutation", "a mutation's lines go out in one write() each",
          "cruxsql/facts/journal.py",
          "            write_all(fd, payload)\n",
          "            for piece in bytes(payload).splitlines(keepends=True):  # planted: split writes\n"
          "                write_all(fd, piece)\n",
          ("tests/facts/test_journal_durability.py::test_a_kill_right_after_the_journal_write_leaves_the_whole_mutation_in_the_file",)),
    Break("reserved-prefix-typo", "a typo in the daemon-owned prefix list (`__legal_hold_::`)",
          "cruxsql/facts/privacy.py",
          '    "__gpu1_receipt__::", "__incident__::", "__legal_hold__::", "__legal_hold_receipt__::",',
          '    "__gpu1_receipt__::", "__incident__::", "__legal_hold_::", "__legal_hold_receipt__::",',
          ("tests/facts/test_reserved_prefixes_pinned.py",)),
    Break("identity-from-agent-argument", "the MCP server takes the agent from an `agent` argument",
          "cruxsql/mcp/server.py",
          "        self._start_indexing()\n", _identity_from_argument("agent", "agent"),
          ("tests/mcp/test_identity_arguments.py",)),
    Break("identity-from-tenant-argument", "the MCP server takes the tenant from a `tenant` argument",
          "cruxsql/mcp/server.py",
          "        self._start_indexing()\n", _identity_from_argument("tenant", "tenant"),
          ("tests/mcp/test_identity_arguments.py",)),
    Break("erasure-scan-skips-wal", "the erasure scan skips `-wal` files",
          "cruxsql/governance/erasure_scan.py", _SCAN_FILES,
          '        if not path.is_file() or path.is_symlink() or path.name.endswith("-wal"):  # planted\n',
          ("tests/governance/test_erasure_scan_reach.py",)),
    Break("erasure-scan-skips-quarantine", "the erasure scan skips quarantined `.torn.` / `.corrupt.` files",
          "cruxsql/governance/erasure_scan.py", _SCAN_FILES,
          '        if not path.is_file() or path.is_symlink() or ".torn." in path.name or ".corrupt." in path.name:\n',
          ("tests/governance/test_erasure_scan_reach.py",)),
    Break("erasure-whole-under-writer-lock", "an erasure holds the writer lock from its delete to its report",
          "cruxsql/governance/erasure.py",
          "    with erasure_lock.held(store):\n        return execute(store, kind=\"erasure\"",
          "    with erasure_lock.held(store), store.writer_lock():  # planted\n"
          "        return execute(store, kind=\"erasure\"",
          ("tests/governance/test_erasure_concurrency.py::test_writers_store_while_the_erasure_takes_its_snapshot_and_scans",)),
    Break("repair-completes-a-running-erasure", "the repair on open ignores the erasure lock",
          "cruxsql/governance/erasure_recovery.py",
          "    return [] if not entries or erasure_lock.running(data_dir) else entries\n",
          "    return entries  # planted\n",
          ("tests/governance/test_erasure_concurrency.py::test_an_erasure_running_elsewhere_is_not_completed_by_the_next_command",)),
    Break("completion-of-a-running-erasure", "an interrupted erasure is completed although its process holds the "
          "erasure lock", "cruxsql/governance/erasure_recovery.py",
          "        if not free:  # an erasure is running in another process: its entry is not interrupted\n",
          "        if False:  # planted\n",
          ("tests/governance/test_erasure_concurrency.py::test_an_erasure_running_elsewhere_is_not_completed_by_the_next_command",)),
    Break("hold-placed-mid-erasure", "a legal hold is placed without waiting for a running erasure",
          "cruxsql/governance/legal_holds.py",
          "    with erasure_lock.held(store):\n        _store_state(store, hold, receipt_id, who)\n",
          "    _store_state(store, hold, receipt_id, who)  # planted\n",
          ("tests/governance/test_erasure_concurrency.py::test_no_hold_is_placed_while_an_erasure_runs",)),
    Break("repair-fails-on-a-held-back-erasure", "a pending erasure whose compaction a hold refuses makes every "
          "command's repair fail", "cruxsql/governance/erasure_recovery.py",
          "            except compaction.LegalHoldBlocked:\n",
          "            except KeyError:  # planted\n",
          ("tests/governance/test_erasure_concurrency.py::"
           "test_a_held_fact_deleted_mid_erasure_leaves_the_erasure_pending_and_the_store_usable",)),
    Break("erasure-values-read-after-the-lock", "the erasure reads the values it erases after releasing the "
          "writer lock (a compaction in between leaves the report without needles)",
          "cruxsql/governance/erasure.py",
          "            snapshot.enter_context(store.read_snapshot())\n"
          "            store.db.execute(\"SELECT count(*) FROM facts WHERE deleted = 1\").fetchall()\n",
          "            pass  # planted\n",
          ("tests/governance/test_erasure_concurrency.py::test_a_compaction_right_after_the_delete_does_not_empty_the_report",)),
    Break("compaction-ignores-a-running-erasure", "a plain compaction does not wait for a running erasure",
          "cruxsql/governance/compaction.py",
          "    with nullcontext() if for_erasure else erasure_lock.held(store), _snapshot(store, view_update) as prebuilt:\n",
          "    with nullcontext(), _snapshot(store, view_update) as prebuilt:  # planted\n",
          ("tests/governance/test_erasure_concurrency.py::test_a_compaction_waits_for_a_running_erasure",)),
    Break("interrupted-erasure-abandoned-after-a-compaction", "an interrupted erasure whose deleted facts were "
          "compacted away before its ledger recorded them is abandoned, with no report",
          "cruxsql/governance/erasure_recovery.py",
          "                                 gone=tuple(gone) if resume is None else ())\n",
          "                                 gone=())  # planted\n",
          ("tests/governance/test_erasure_concurrency.py::"
           "test_an_erasure_killed_after_its_delete_whose_facts_were_compacted_away_is_reported_not_abandoned",)),
    Break("erasure-gives-up-after-its-delete", "an erasure keeps the store's lock timeout after its delete",
          "cruxsql/governance/erasure.py",
          "        store.journal.lock_timeout = None\n",
          "        pass  # planted\n",
          ("tests/governance/test_erasure_concurrency.py::"
           "test_after_its_delete_the_erasure_waits_for_the_writer_lock_past_the_timeout",)),
    Break("recall-rereads-through-the-candidates", "query_facts re-reads its chosen matches through the whole "
          "trigram candidate list again",
          "cruxsql/recall/facade.py",
          "    return [clause for clause in where if clause not in (_CANDIDATES, _TENANT_IN_INDEX)] + [\n",
          "    return where + [  # planted\n",
          ("tests/recall/test_plan.py::test_the_chosen_matches_are_read_again_by_their_own_seqs",)),
    Break("recall-tenant-drives-an-entity-query", "beside an entity filter, query_facts lets the tenant choose "
          "the index again",
          "cruxsql/recall/facade.py",
          "        if \"ent\" not in plan.params and \"ep\" not in plan.params:\n",
          "        if True:  # planted\n",
          ("tests/recall/test_plan.py::test_an_entity_filter_keeps_driving_the_plan",)),
    Break("compaction-checkpoints-under-the-lock", "a compaction's view commit runs an inline WAL checkpoint "
          "under the writer lock",
          "cruxsql/facts/checkpointer.py",
          "        if before >= self._pages * INLINE_FACTOR and not self._inline_paused:\n",
          "        if before >= self._pages * INLINE_FACTOR:  # planted\n",
          ("tests/facts/test_write_path.py::test_a_compaction_checkpoints_the_wal_only_after_releasing_the_writer_lock",)),
    Break("backup-time-after-its-copy", "a backup's time is taken when its copy ends, not at its snapshot",
          "cruxsql/governance/backup.py",
          "            created = timestamps.format_event_time(timestamps.now_ns())\n",
          "            created = timestamps.format_event_time(timestamps.now_ns() + 60_000_000_000)  # planted\n",
          ("tests/governance/test_backup.py::test_an_erasure_that_finishes_during_the_copy_is_applied_again_on_restore",)),
    Break("recall-fusion-off", "recall's `auto` never fuses the dense lane, even with a real model",
          "cruxsql/recall/relevance.py",
          'used = fusion if fusion != "auto" else ("weighted" if _embedder_is_real(embedder) else "bm25")',
          'used = fusion if fusion != "auto" else "bm25"  # planted',
          ("tests/recall/test_evidence.py::test_fusion_finds_a_paraphrase",)),
    Break("recall-neighbour-context-off", "a turn is scored without its neighbouring turns",
          "cruxsql/recall/turn_context.py",
          "    if not len(seqs) or NEIGHBOUR_WEIGHT == 0:\n",
          "    if True:  # planted\n",
          ("tests/recall/test_evidence.py::test_a_turn_is_found_through_the_question_next_to_it",)),
    Break("recall-time-cue-inverted", "a \"when\" question prefers the turns that do not say when",
          "cruxsql/recall/turn_context.py",
          "    return np.array([1.0 + TIME_BOOST if says_when(v) else 1.0 for v in values], dtype=np.float32)\n",
          "    return np.array([1.0 if says_when(v) else 1.0 + TIME_BOOST for v in values], dtype=np.float32)  # planted\n",
          ("tests/recall/test_evidence.py::test_a_when_question_prefers_the_turn_that_says_when",)),
    Break("conversation-positions", "store_conversation numbers every call's turns from #0, so a later call "
          "supersedes the turns already stored",
          "cruxsql/recall/conversations.py",
          "        start = 0 if last is None else last + 1\n",
          "        start = 0  # planted\n",
          ("tests/recall/test_conversations.py::test_two_concurrent_writers_never_take_the_same_position",
           "tests/recall/test_conversations.py::test_a_blank_tenant_continues_the_default_tenants_conversation_and_supersedes_no_turn")),
    Break("turn-line-breaks", "a turn's recall line keeps the line breaks of its text and ids",
          "cruxsql/recall/turns.py",
          '    return _LINE_BREAK.sub(" ⏎ ", " · ".join((head, *(f for f in fields if f))))\n',
          '    return " · ".join((head, *(f for f in fields if f)))  # planted\n',
          ("tests/recall/test_turns.py::test_the_answer_line_stays_one_line_at_every_line_boundary",)),
    Break("unindexed-tail-not-scanned", "a read beside a writer answers from the text index alone, missing the "
          "facts acknowledged writes left to a later read's indexing",
          "cruxsql/recall/text_index.py",
          "        self.tail = np.arange(state[1] + 1, max_seq + 1, dtype=np.int64)\n"
          "        self.terms = TermsWithTail(self.db, state[1], max_seq)\n",
          "        self.tail, self.terms = None, FactTerms(self.db)  # planted\n",
          ("tests/recall/test_write_indexing.py::test_a_read_beside_a_writer_scans_the_unindexed_tail_with_the_same_answers",)),
    Break("restore-without-erasures", "a restore goes live without applying again the erasures made since its backup",
          "cruxsql/governance/restore.py",
          "            outcome.reports = erasure_recovery.reapply(store, later, str(src)) if later else []\n",
          "            outcome.reports = []  # planted\n",
          ("tests/governance/test_restore_erasure.py::test_restore_into_a_new_directory_applies_the_source_stores_erasures",)),
    Break("killed-restore-left-alone", "the next command neither completes nor rolls back a killed restore",
          "cruxsql/governance/restore.py",
          "    done = _finish_committed(target)\n",
          "    return []  # planted\n",
          ("tests/governance/test_restore_erasure.py::test_a_restore_killed_at_any_step_leaves_no_erased_value_live",)),
    Break("restore-recovery-takes-lookalikes", "the next command removes an operator's own directory named "
          "like a restore's staging or replaced directory", "cruxsql/governance/restore.py",
          "            return []  # no marker, yet something in it: not known to be a restore's staging\n",
          "            pass  # planted\n",
          ("tests/governance/test_restore_erasure.py::test_the_operators_own_directories_named_like_a_restores_are_never_removed",)),
    Break("restore-misses-target-erasures", "a restore commits without the target's erasure lock and ledger",
          "cruxsql/governance/restore.py",
          "    stores = {d.resolve() for d in (source, target) if d is not None and _holds_store(d)}\n",
          "    stores = {d.resolve() for d in (source,) if d is not None and _holds_store(d)}  # planted\n",
          ("tests/governance/test_restore_erasure.py::test_an_erasure_in_the_target_while_the_restore_stages_is_applied_too",)),
    Break("recorded-backup-fails-erasure", "a recorded backup still holding erased values makes the erasure fail",
          "cruxsql/governance/erasure.py",
          '"ok": verification.ok and not errors and not unaccounted(outside),',
          '"ok": verification.ok and not errors and not outside,  # planted',
          ("tests/governance/test_restore_erasure.py::test_doctor_warns_about_recorded_copies_and_stays_critical_for_an_unaccounted_one",)),
    Break("recall-time-window-off", "a question naming a period (\"in May 2023\", \"last month\") prefers no turn",
          "cruxsql/recall/relevance.py",
          "    window = _question_window(db, seqs, scores, question)\n",
          "    window = None  # planted\n",
          ("tests/recall/test_conversations.py::test_a_question_naming_a_month_prefers_the_turns_of_that_month",
           "tests/recall/test_conversations.py::test_last_month_is_read_at_the_conversations_latest_time")),
    Break("recall-cold-dense-unbounded", "a cold recall embeds every fact lacking a vector",
          "cruxsql/recall/relevance.py",
          "    wanted = np.concatenate([best, oldest[~np.isin(oldest, best)]])[:LAZY_EMBED]\n",
          "    wanted = np.flatnonzero(~index.has)  # planted\n",
          ("tests/recall/test_dense_lane.py::"
           "test_a_cold_query_embeds_at_most_lazy_embed_facts_bm25_best_first_and_says_how_many_lack_one",)),
    Break("recall-fact-fused-as-a-turn", "a plain fact is fused with the model at a turn's weights",
          "cruxsql/recall/relevance.py",
          "        turn = np.array([bool(r[4]) for r in visible], dtype=bool)\n",
          "        turn = np.ones(len(visible), dtype=bool)  # planted\n",
          ("tests/recall/test_dense_lane.py::test_a_plain_fact_weighs_the_model_more_than_a_turn_does",)),
    Break("recall-lazy-embed-beside-the-indexer", "a query embeds its LAZY_EMBED facts at once while the "
          "background indexer is filling the store",
          "cruxsql/recall/relevance.py",
          '    bounded = getattr(recall.search_cache.get("indexer"), "running", False)\n',
          "    bounded = False  # planted\n",
          ("tests/recall/test_dense_lane.py::"
           "test_beside_a_running_indexer_a_cold_query_on_a_slow_model_stops_embedding_after_its_time_budget",)),
)


def check(root: Path) -> list[str]:
    """Every break's problem against the tree at `root` (none: every anchor applies once, every test exists)."""
    problems = []
    names = [b.name for b in BREAKS]
    problems += [f"{n}: named twice" for n in sorted({n for n in names if names.count(n) > 1})]
    for b in BREAKS:
        path = root / b.path
        if not path.is_file():
            problems.append(f"{b.name}: {b.path} does not exist")
            continue
        try:
            planted = b.plant(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if planted == path.read_text(encoding="utf-8"):
            problems.append(f"{b.name}: planting changes nothing")
        try:
            compile(planted, b.path, "exec")
        except SyntaxError as exc:
            problems.append(f"{b.name}: the planted {b.path} does not compile: {exc}")
        for test in b.tests:
            file, _, function = test.partition("::")
            if not (root / file).is_file():
                problems.append(f"{b.name}: test file {file} does not exist")
            elif function and f"def {function}(" not in (root / file).read_text(encoding="utf-8"):
                problems.append(f"{b.name}: {file} has no test {function}")
    return problems
