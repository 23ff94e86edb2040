"""The background fact indexer: fact vectors computed as facts (and conversation turns) arrive.

`FactIndexer` runs on a daemon thread in the process that serves recall: `cruxsql mcp` starts one
(`for_recall`) that loads the dense lane's model itself (recall's shared one, so a server holds one copy)
and stops at once when there is none. It polls the view's journal checkpoint row (one row, read in
microseconds); when the journal moved, it embeds the facts that have no vector for its embedder yet,
oldest first, BATCH at a time (its halves on two threads: the two cores of a small server embed ~2x the
turns per second of one), and keeps them in `fact_embeddings`, as the lazy path in
`fact_embeddings.fact_vectors` does, with which it shares the text (`fact_text`) and the write.

It yields to the server's calls: given `quiet` (seconds since the server's last call ended, 0 during
one), it starts a batch only once the server has been quiet for QUIET_S (or has not been for MAX_DEFER_S:
a server with calls streaming in still gets its vectors), so a burst of calls never shares
the process's two cores (and its interpreter lock) with the model; it embeds in the gaps between an
agent's turns instead. It never blocks a writer: it has its own connection to the view; the model runs outside any
transaction; each batch's vectors go in in one short write transaction, and only for facts still there
unchanged (a fact erased or changed while its batch was being embedded gets no vector: the triggers
that drop a changed fact's vector have already run). A recall that comes before the indexer embeds
what it needs itself (the lazy path, a handful of facts within a few milliseconds while the indexer runs),
so the indexer only ever moves work off the query's path; its threads run NICE below the calls' (Linux). The
vectors depend on the fact's text and the model alone, so a rebuilt view gets the same ones again.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Optional

import apsw
import numpy as np

from ..embeddings import Embedder
from ..facts import view_file
from .fact_embeddings import fact_text, keep_vectors, vector_entity
from .facade import Recall
from .relevance import shared_embedder

log = logging.getLogger("cruxsql.recall")
BATCH = 128                # facts per round: the model groups them by token count (fewer, larger products)
WORKERS = 2                # threads embedding a round's halves at once (numpy's products release the GIL)
POLL_S = 0.2               # how often the journal checkpoint row is read when nothing is happening
QUIET_S = 0.25             # how long the server must have had no call before a batch starts
MAX_DEFER_S = 10.0         # a batch waits at most this long for quiet: a server never quiet still gets vectors
NICE = 10                  # added to the indexer's threads' niceness (Linux: a thread's own): below the calls'


def yield_to_calls() -> None:
    """Lower the calling thread's CPU priority by NICE where a thread has its own (Linux): while the indexer
    fills a large store, the server's calls (a query's own embedding among them) get the cores first."""
    if sys.platform.startswith("linux"):
        try:
            thread = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, thread, min(os.getpriority(os.PRIO_PROCESS, thread) + NICE, 19))
        except OSError:
            pass    # not permitted here: the indexer runs at the calls' priority


class FactIndexer:
    """Embeds, on its own thread, every fact of the view at `view_path` that has no vector for the embedder
    `load_embedder` returns (called on that thread; None: nothing to do)."""

    def __init__(self, view_path: Path, load_embedder: Callable[[], Optional[Embedder]], poll_s: float = POLL_S,
                 quiet: Optional[Callable[[], float]] = None) -> None:
        self._path = view_path
        self._load_embedder = load_embedder
        self._embedder: Optional[Embedder] = None
        self._poll_s = poll_s
        self._quiet = quiet
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._seen: Any = None              # the journal checkpoint row the last catch-up started from
        self.indexed = 0                    # facts embedded since start

    @classmethod
    def for_recall(cls, recall: Recall, load_embedder: Optional[Callable[[], Optional[Embedder]]] = None,
                   quiet: Optional[Callable[[], float]] = None) -> Optional["FactIndexer"]:
        """An indexer for `recall`'s dense lane (its shared model, unless `load_embedder` is given), or None
        for a read-only store. While it runs, `recall`'s queries leave the filling to it (relevance.py's
        LAZY_BUDGET_S). `quiet`: see the module docstring."""
        if recall.store.read_only:
            return None
        indexer = cls(Path(recall.store.data_dir) / view_file.DB_NAME,
                      load_embedder or (lambda: shared_embedder(recall)), quiet=quiet)
        recall.search_cache["indexer"] = indexer
        return indexer

    @property
    def running(self) -> bool:
        """Whether its thread is running and not asked to stop."""
        return self._thread is not None and self._thread.is_alive() and not self._stopping.is_set()

    def start(self) -> "FactIndexer":
        self._thread = threading.Thread(target=self._run, name="cruxsql-fact-indexer", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the thread to stop after its current batch, and wait for it."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _wait_for_quiet(self) -> bool:
        """Wait until the server has had no call for QUIET_S, at most MAX_DEFER_S (at once without `quiet`);
        False: stopping."""
        deadline = time.monotonic() + MAX_DEFER_S
        while self._quiet is not None and not self._stopping.is_set() and (quiet := self._quiet()) < QUIET_S:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._stopping.wait(min(QUIET_S - quiet, left))
        return not self._stopping.is_set()

    def _run(self) -> None:
        yield_to_calls()
        try:
            if not self._wait_for_quiet():  # the model's load is a second of CPU too
                return
            self._embedder = self._load_embedder()
            if self._embedder is not None:
                self._poll()
        except Exception as exc:   # a helper: the lazy path still serves every recall, which reports a bad model
            log.warning("the fact indexer stopped: %s: %s", type(exc).__name__, exc)

    def _poll(self) -> None:
        db = view_file.open_connection(self._path, migrate_schema=False)
        try:
            while not self._stopping.is_set():
                checkpoint = db.execute("SELECT * FROM journal_checkpoint WHERE id = 1").fetchone()
                if checkpoint != self._seen:
                    self._seen = checkpoint
                    self.catch_up(db)
                self._stopping.wait(self._poll_s)
        finally:
            db.close()

    @property
    def embedder(self) -> Optional[Embedder]:
        """The model, once loaded (None before, or when there is none)."""
        return self._embedder

    def fill(self) -> int:
        """Embed, on the calling thread, every fact without a vector; how many there were."""
        db = view_file.open_connection(self._path, migrate_schema=False)
        try:
            return self.catch_up(db)
        finally:
            db.close()

    def catch_up(self, db: apsw.Connection) -> int:
        """Embed batches until no fact lacks a vector (or the indexer is stopped); how many were embedded."""
        done = 0
        while not self._stopping.is_set():
            if not self._wait_for_quiet():
                break
            embedded = self.index_batch(db)
            if not embedded:
                break
            done += embedded
        return done

    def _embedded(self, embedder: Embedder, texts: list[str]) -> np.ndarray:
        """`texts`' vectors, WORKERS parts embedded at once (the model holds BLAS to one thread each)."""
        size = -(-len(texts) // WORKERS)
        parts = [texts[start:start + size] for start in range(0, len(texts), size)]
        with ThreadPoolExecutor(WORKERS, thread_name_prefix="cruxsql-fact-indexer", initializer=yield_to_calls) as pool:
            return np.concatenate(list(pool.map(embedder.embed_batch, parts)))

    def index_batch(self, db: apsw.Connection) -> int:
        """Embed the BATCH oldest facts without a vector; how many there were."""
        if self._embedder is None:
            self._embedder = self._load_embedder()
            if self._embedder is None:
                return 0
        profile = self._embedder.semantic_profile().hash
        rows: list[tuple[str, str, str, str]] = db.execute(  # type: ignore[assignment]
            "SELECT f.fact_id, f.entity, f.key, f.value FROM facts f WHERE f.deleted = 0 AND NOT EXISTS "
            "(SELECT 1 FROM fact_embeddings e WHERE e.fact_id = f.fact_id AND e.profile_hash = ?) "
            "ORDER BY f.seq LIMIT ?", (profile, BATCH)).fetchall()
        if not rows:
            return 0
        texts = [fact_text(vector_entity(entity), key, value) for _, entity, key, value in rows]
        keep_vectors(db, profile, rows, self._embedded(self._embedder, texts))
        self.indexed += len(rows)
        return len(rows)
