"""The workspace facade: index a folder into DATA_DIR/workspace.db and serve the six ctx_* verbs.

Every verb call goes through `Workspace.call(session, verb, **args)`, which refreshes files edited
since indexing, serves ctx_search/ctx_context from a result cache keyed by the config fingerprint and
the corpus signature, adds the ConvergenceGovernor's nudge, and records the call in the ledger.
The session names who is calling; it comes from the operator or the connection, never a tool argument.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Optional

from ..errors import InvalidInput
from . import governor, ledger
from .budget import estimate_tokens
from .context import ctx_context
from .doc import ctx_doc
from .expand import ctx_expand
from .impact import ctx_impact
from .indexer import Indexer, IndexReport, Progress
from .ranking import SWITCHES, RankingConfig
from .read import ctx_read
from .reply import Reply
from .schema import fingerprint, meta, open_db, set_meta
from .search import ctx_search

VERBS: dict[str, Callable[..., Reply]] = {
    "ctx_search": ctx_search, "ctx_read": ctx_read, "ctx_doc": ctx_doc,
    "ctx_impact": ctx_impact, "ctx_context": ctx_context, "ctx_expand": ctx_expand,
}
CACHED = frozenset({"ctx_search", "ctx_context"})
RANKED = frozenset({"ctx_search", "ctx_context"})


class Workspace:
    def __init__(self, data_dir: Path, config: RankingConfig = RankingConfig()) -> None:
        self.data_dir = data_dir
        self.config = config
        self.db = open_db(data_dir)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def root(self) -> Path:
        root = meta(self.db, "root")
        if not root:
            raise InvalidInput(f"no workspace is indexed in {self.data_dir}: run `cruxsql workspace index PATH` first")
        return Path(root)

    def index(self, root: Path, progress: Progress = None) -> IndexReport:
        if not root.is_dir():
            raise InvalidInput(f"workspace path {str(root)!r} is not a directory")
        report = Indexer(self.db, root).index(progress)
        self._forget_stale_results()
        return report

    def status(self) -> dict[str, Any]:
        root = meta(self.db, "root")
        classes = dict(self.db.execute("SELECT path_class, count(*) FROM files GROUP BY path_class ORDER BY 1"))
        skipped: dict[str, int] = {}
        for (reason,) in self.db.execute("SELECT reason FROM skipped"):
            key = reason.split(" (")[0]
            skipped[key] = skipped.get(key, 0) + 1
        one = lambda sql: self.db.execute(sql).get  # noqa: E731
        return {"root": root or None, "database": str(self.data_dir / "workspace.db"),
                "files": one("SELECT count(*) FROM files"), "classes": classes,
                "symbols": one("SELECT count(*) FROM symbols"), "imports": one("SELECT count(*) FROM imports"),
                "resolved_imports": one("SELECT count(*) FROM imports WHERE resolved IS NOT NULL"),
                "md_sections": one("SELECT count(*) FROM md_sections"),
                "terms": one("SELECT count(DISTINCT term) FROM postings"),
                "approximate_files": one("SELECT count(*) FROM files WHERE approx != ''"),
                "skipped": dict(sorted(skipped.items())), "corpus": meta(self.db, "corpus") or None,
                "fingerprint": fingerprint(self.config), "ledger_calls": one("SELECT count(*) FROM ledger")}

    def call(self, session: str, verb: str, off: frozenset[str] = frozenset(), **args: Any) -> Reply:
        """Run one verb for `session`; `off` names ranking signals to switch off (ctx_search/ctx_context)."""
        if verb not in VERBS:
            raise InvalidInput(f"verb {verb!r} is unknown: expected one of {', '.join(VERBS)}")
        if not session:
            raise InvalidInput("session is empty")
        unknown = sorted(set(off) - set(SWITCHES))
        if unknown:
            raise InvalidInput(f"ranking signal {unknown[0]!r} is unknown: expected one of {', '.join(SWITCHES)}")
        root = self.root
        if Indexer(self.db, root).refresh():
            self._forget_stale_results()
        config = self.config.with_switches(frozenset(off))
        args = {k: v for k, v in args.items() if v is not None}
        if verb in RANKED:
            args["config"] = config
        key_args = {k: v for k, v in args.items() if k != "config"} | ({"off": sorted(off)} if off else {})
        reply = self._cached(verb, key_args, config) if verb in CACHED else None
        if reply is None:
            reply = VERBS[verb](self.db, root, **args)
            if verb in CACHED:
                self._store(verb, key_args, config, reply)
        signature = governor.call_signature(verb, key_args)
        line = governor.nudge(verb, signature, ledger.recent_signatures(self.db, session))
        if line:
            reply = Reply(f"{reply.text}\n{line}", reply.data | {"nudge": line}, reply.files)
        ledger.record(self.db, ledger.LedgerEntry(
            session, verb, key_args, signature, estimate_tokens(reply.text),
            ledger.full_read_tokens(self.db, reply.files), reply.files, bool(line)))
        return reply

    # ---- result cache --------------------------------------------------------------------------

    def _key(self, verb: str, args: dict[str, Any], config: RankingConfig) -> str:
        blob = json.dumps({"fingerprint": fingerprint(config), "corpus": meta(self.db, "corpus"), "verb": verb,
                           "args": args}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _cached(self, verb: str, args: dict[str, Any], config: RankingConfig) -> Optional[Reply]:
        row = self.db.execute("SELECT payload FROM result_cache WHERE key=?", (self._key(verb, args, config),)).fetchone()
        if row is None:
            return None
        payload = json.loads(row[0])
        return Reply(payload["text"], payload["data"], payload["files"])

    def _store(self, verb: str, args: dict[str, Any], config: RankingConfig, reply: Reply) -> None:
        payload = json.dumps({"text": reply.text, "data": reply.data, "files": reply.files}, ensure_ascii=False)
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO result_cache(key, payload) VALUES (?, ?)",
                            (self._key(verb, args, config), payload))

    def _forget_stale_results(self) -> None:
        """Results of an older corpus can never be hit again (the corpus is in the key): drop them."""
        corpus = meta(self.db, "corpus")
        if meta(self.db, "cached_corpus") != corpus:
            with self.db:
                self.db.execute("DELETE FROM result_cache")
                set_meta(self.db, "cached_corpus", corpus)
