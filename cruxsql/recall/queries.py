"""Fact recall: `query_facts`, `get_bootstrap` and `memory_view` with Crux semantics.

`Recall(store)` is the API every surface (CLI, MCP server, Python callers) uses; nothing here prints.

query_facts runs the exact pipeline of Crux's crates/crux-mcp/src/tools/facts.rs inside SQLite:
not deleted -> `as_of` valid time -> superseded gate -> visibility (agent scope) -> tenant (always
applied) -> entity prefix -> entity -> OR-match of lowercased terms against the lowercased value, key
and visible entity -> rank by effective confidence desc, `stored_at` desc, `fact_id` -> floor
(`filtered_below_threshold`) -> selection (budget greedy fill, first fact always; else `top_k`).
Terms of three or more characters are answered from trigram postings (`text_index.TextIndex`), the
rest by a scan; candidates are always re-checked against the rows. `known_at` answers "what did the
store believe at T" from the journal's events (`timeline.Timeline`).

Where cruxsql deliberately differs from Crux (the seeds call these defects, or Crux has no rule):
* the tenant filter is always applied (`default` unless the caller names one), in all three calls;
* `get_bootstrap` honours `token_budget` (greedy fill by fact tokens, first fact always) and enforces
  agent scope: the daemon-owned, born-private `__bootstrap__::` namespace is what it exists to read,
  the caller's own `__agent::<me>::__bootstrap__::...` facts are readable under their logical entity,
  and no other private fact is; ranking is the store query's keyword path (confidence, stored_at,
  fact_id; no embedder), superseded versions are kept as Crux's store query keeps them;
* ties in every ranking are broken by `fact_id`; the CRC-v1 epitome is cut at a character boundary;
* every result says how many facts matched and how many were left out (`matched`, `left_out`,
  `filtered_below_threshold`; the envelope's `total_candidates` / `capped`); memory_view counts up to
  MEMORY_VIEW_COUNT_CAP and then says `capped` (its counts become lower bounds);
* `known_at` (transaction time) is new: facts stored after T are invisible and deletions,
  supersessions, validity, horizon and re-verification changes made after T are not yet applied;
  freshness is judged at T unless `now` is given. Facts a `replace_latest` removed from the view
  cannot be shown as of before their removal.
* salience counts live in `recall_salience` in the view, never in the journal, and so survive a
  restart (Crux resets them; every CLI call is a restart, which would make salience meaningless);
* `get_bootstrap` appends the `tool-output` catalogue after the budgeted facts;
* under a `token_budget` the CRC-v1 envelope's own text fits the budget (Crux counts only the values and
  40 tokens a pointer); below the least envelope (one fact, ~240 tokens) the answer is compact fact lines
  (`entity · key: value · id`, fact_lines.py) and a line that says so and names the budget the envelope
  needs (`compact_answer`); the MCP tool holds the budget over its whole answer (`QueryResult.reshaped`).
A blank query still matches nothing (Crux: OR over zero terms).
"""

from __future__ import annotations

import functools
import math
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, TypeVar, Union, overload

import apsw
import numpy as np

from ..embeddings import Embedder
from ..errors import InvalidInput
from ..facts import time_phrases, timestamps
from ..facts.codec import to_f32, token_cost
from ..facts.store import Store
from . import crc_v1, scope, tokens
from .fact_lines import fact_line, fitted
from .fact_embeddings import dense_scores, fact_vectors
from .text_index import INDEX_EVERY, TextIndex
from .timeline import Timeline
from .freshness import STALE_DEMOTION_FACTOR, DecayPolicy, age_hours, ns_to_ms, salience_enabled

if TYPE_CHECKING:
    from .relevance import RecallResult

TimeArg = Union[None, str, int]
SEARCH_TIMES = ("stored_after", "stored_before", "valid_after", "valid_before", "as_of", "known_at")
_I64_MAX = 9223372036854775807

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_TOP_K = 10
BOOTSTRAP_PREFIX = "__bootstrap__::"
BOOTSTRAP_TOP_K = 100
# memory_view counts matching facts only up to this many (an exact count is a scan of the whole view)
MEMORY_VIEW_COUNT_CAP = 1000
MEMORY_PIN_PREFIX = "__memory_pin::"
MEMORY_VIEW_RESERVED = ("__agent::", "__ops::", "__bootstrap__::", "__memory_pin::", "__work__::", "__decisions__::",
                        "__project_layer__::", "__tenant_metadata__::")
_TOPIC_ALIASES = {"doc": "doc", "docs": "doc", "pattern": "pattern", "patterns": "pattern", "error": "resolution",
                  "errors": "resolution", "resolution": "resolution", "resolutions": "resolution",
                  "tool": "tool-output", "tool-output": "tool-output", "tool-outputs": "tool-output"}
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def pin_value_pinned(value: str) -> bool:
    """A pin record's value pins: exactly `1`, or `true` ASCII-case-insensitively, untrimmed (`" 1"`,
    `"true\\n"` and `"ＴＲＵＥ"` do not), as crates/crux-mcp/src/tools/memory.rs reads it."""
    return value == "1" or value.translate(_ASCII_LOWER) == "true"


# Above this share of all facts, trigram candidates cost more than a scan.
_SCAN_SHARE = 0.3
# A scan first ranks the matches among the newest 1/_PROBE_SHARE of the facts (at least _PROBE_MIN), to
# bound which matches it must keep (see _probe_bound).
_PROBE_SHARE = 256
_PROBE_MIN = 1024
# The trigram candidates' filter. Re-reading matches already found (`_among`) drops it: beside a short
# list of seqs, SQLite still drove the lookup from the candidates (at 1M facts, 148k of them for a
# common word: 55 ms of a 280 ms query).
_CANDIDATES = "f.seq IN carray(:cand)"
# The tenant as an index may use it (the visibility plan's own `+f.tenant_hash` never drives the plan).
_TENANT_IN_INDEX = "f.tenant_hash = :tenant"

ROW_KEYS = ("fact_id", "entity", "key", "value", "confidence", "effective_confidence", "horizon_class", "freshness",
            "age_hours", "superseded_by", "actor")


def _among(where: list[str], seqs_param: str) -> list[str]:
    """`where` for re-reading matches found with it, the seqs `seqs_param` only (driven by them)."""
    return [clause for clause in where if clause not in (_CANDIDATES, _TENANT_IN_INDEX)] + [
        f"f.seq IN carray(:{seqs_param})"]


# --- argument checks ------------------------------------------------------------------------------

def _time_arg(value: TimeArg, name: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"{name} must be an RFC 3339 timestamp (e.g. 2026-01-15T00:00:00Z), got {value!r}")
    if isinstance(value, int):
        return value
    try:
        return timestamps.column_ns(timestamps.parse_ns(value))  # compared with the view's *_ns columns
    except InvalidInput:
        raise InvalidInput(
            f"{name} must be an RFC 3339 timestamp (e.g. 2026-01-15T00:00:00Z), got {value!r}") from None


@overload
def _count_arg(value: int, name: str) -> int: ...
@overload
def _count_arg(value: Optional[int], name: str) -> Optional[int]: ...
def _count_arg(value: Optional[int], name: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{name} must be a non-negative integer, got {value!r}")
    return value


def _floor_arg(value: Optional[float]) -> Optional[float]:
    """Validated as f64 in 0.0..=1.0, then cast to f32 as `handle_query_facts` does (`f as f32`), and
    compared widened back to f64: a fact at 0.7 clears a 0.7 floor."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"min_effective_confidence must be a number in 0.0..=1.0, got {value!r}")
    return to_f32(value)


def normalize_topic(topic: Optional[str]) -> Optional[str]:
    """`normalize_bootstrap_topic` (crates/crux-mcp/src/tools/facts.rs): doc|docs -> doc, pattern(s) -> pattern,
    error(s)|resolution(s) -> resolution, tool|tool-output(s) -> tool-output (ASCII case-insensitive);
    anything else the trimmed original. A blank topic stays a topic: "" (prefix `__bootstrap__:::`)."""
    if topic is None:
        return None
    trimmed = topic.strip(scope.RUST_WHITESPACE)
    return _TOPIC_ALIASES.get(trimmed.translate(_ASCII_LOWER), trimmed)


# --- results --------------------------------------------------------------------------------------

@dataclass
class QueryResult:
    """What `query_facts` returns. `rows` are the Crux row objects (ROW_KEYS order)."""

    rows: list[dict[str, Any]]
    filtered_below_threshold: int
    matched: int                 # facts that passed every filter and the OR-match (before the floor)
    left_out: int                # above the floor but not returned (top_k or budget)
    total_tokens: int            # sum of the returned facts' `tokens`
    contract: str                # "crc-v1" or "legacy"
    token_budget: Optional[int]
    top_k: int
    crc_v1: Optional[dict[str, Any]] = None
    known_at: Optional[str] = None
    as_of: Optional[str] = None
    compact: Optional["CompactAnswer"] = None    # the budget is below the least CRC-v1 envelope
    entity: Optional[str] = None                 # as asked (the envelope names them)
    query: Optional[str] = None
    row_tokens: list[int] = field(default_factory=list)   # each row's `tokens`, what Crux's budget counts

    def least_envelope_tokens(self) -> int:
        """The compact text's tokens of the least CRC-v1 envelope: the first row hydrated."""
        return tokens.estimate_tokens_str(tokens.compact_json(
            crc_v1.wrap_facts_tiered(self.rows[:1], self.entity, self.query, 1, len(self.rows))))

    def reshaped(self, budget: int, needs: Optional[int] = None) -> "QueryResult":
        """This CRC-v1 answer shaped to `budget`: Crux's tiered envelope cut until its text fits, or, when
        the envelope `needs` a larger budget (by default the least envelope's own text), compact fact lines
        naming that figure. A surface counting more than the text (the MCP answer as a whole) names its
        own `needs`."""
        needs = self.least_envelope_tokens() if needs is None else needs
        shaped = replace(self, token_budget=budget, crc_v1=None, compact=None)
        if needs > budget:
            shaped.compact = compact_answer(self.rows, self.matched - self.filtered_below_threshold, needs, budget)
        else:
            full, emit = tokens.fact_emit_within_budget(self.row_tokens, budget)
            shaped.crc_v1 = _envelope_within(self.rows, self.entity, self.query, full, emit, budget)
        return shaped

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rows": self.rows}
        if self.crc_v1 is not None:
            out["crc_v1"] = self.crc_v1
        out["filtered_below_threshold"] = self.filtered_below_threshold
        out["matched"] = self.matched
        out["returned"] = len(self.rows)
        out["left_out"] = self.left_out
        out["total_tokens"] = self.total_tokens
        out["contract"] = self.contract
        out["token_budget"] = self.token_budget
        if self.compact is not None:
            out["compact"] = {"envelope_tokens": self.compact.envelope_tokens, "text": self.text()}
        if self.as_of is not None:
            out["as_of"] = self.as_of
        if self.known_at is not None:
            out["known_at"] = self.known_at
        return out

    def crux_payload(self, budgeted: bool = True) -> dict[str, Any]:
        """The Crux MCP tool result: `content` text plus `structuredContent` (crates/crux-mcp/src/tools/facts.rs).

        CRC-v1: the text is the compact envelope; legacy: one line per row; empty: the sentence, and no
        envelope. cruxsql's own counts (`matched`, `left_out`, ...) are in `to_dict()`.

        Under a token budget the structured content obeys it as the text does (Crux sends every row in
        full there, whatever the budget): rows the text hydrates, as many as fit, in full; the other
        rows the text emits as `pointers` (fact ids); `left_out` counts the rest. The envelope is not
        repeated beside them (it is the text). `budgeted=False`: Crux's structure (the holdout's control arm)."""
        text = tokens.compact_json(self.crc_v1) if self.crc_v1 is not None else self.text()
        if self.token_budget is None or not budgeted:
            structured: dict[str, Any] = {"rows": self.rows}
            if self.crc_v1 is not None:
                structured["crc_v1"] = self.crc_v1
            structured["filtered_below_threshold"] = self.filtered_below_threshold
        else:
            structured = self.budgeted_structure(self.token_budget)
        return {"content": [{"type": "text", "text": text}], "structuredContent": structured}

    def budgeted_structure(self, budget: int) -> dict[str, Any]:
        """`{rows, pointers, left_out, filtered_below_threshold}` within `budget` tokens (see crux_payload)."""
        emitted = self.emitted_ids()
        if self.crc_v1 is not None:
            hydrated = {c["id"] for c in self.crc_v1["content"]}
        elif self.compact is not None:
            hydrated = {r["fact_id"] for r in self.rows[:self.compact.whole]}
        else:
            hydrated = set(emitted)
        full = [r for r in self.rows if r["fact_id"] in hydrated]
        shown = self.matched - self.filtered_below_threshold

        def structure(k: int) -> dict[str, Any]:
            ids = [r["fact_id"] for r in full[:k]]
            pointers = [{"fact_id": fid} for fid in emitted if fid not in ids]
            return {"rows": full[:k], "pointers": pointers, "left_out": shown - k - len(pointers),
                    "filtered_below_threshold": self.filtered_below_threshold}

        return structure(tokens.largest_within(len(full), lambda k: tokens.estimate_tokens(structure(k)), budget))

    def emitted_ids(self) -> list[str]:
        """The ids of the rows the text carries, whole or as a pointer or a cut line (a prefix of `rows`)."""
        if self.crc_v1 is not None:
            return [p["id"] for p in self.crc_v1["pointers"]]
        if self.compact is not None:
            return [r["fact_id"] for r in self.rows[:len(self.compact.lines)]]
        return [r["fact_id"] for r in self.rows]

    def text(self) -> str:
        """Crux's legacy text: one line per row, or the empty-result sentence; the compact answer's lines
        when the budget is below the least CRC-v1 envelope."""
        if self.compact is not None:
            return self.compact.text()
        if not self.rows:
            if self.filtered_below_threshold:
                return f"no facts above confidence floor ({self.filtered_below_threshold} below threshold)"
            return "no facts found"
        return _legacy_text(self.rows)


def _legacy_text(rows: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"[{r['entity']}] {r['key']} = {r['value']} (confidence={r['confidence']:.2f}, "
        f"effective_confidence={r['effective_confidence']:.2f}, freshness={r['freshness']}, "
        f"age_hours={r['age_hours']})" for r in rows)


def _envelope_within(rows: list[dict[str, Any]], entity: Optional[str], query: Optional[str], full: int, emit: int,
                     budget: int) -> dict[str, Any]:
    """Crux's tiered envelope (`full` rows hydrated, `emit` emitted), cut until its compact text fits the
    budget: Crux charges only the values and 40 tokens a pointer, so its envelope overshot small budgets
    several times over. The first row is always emitted in full, as in Crux (the smallest answer)."""
    def envelope(k: int, hydrated: int) -> dict[str, Any]:
        return crc_v1.wrap_facts_tiered(rows[:k], entity, query, min(hydrated, k), len(rows))

    def size(k: int) -> int:
        return tokens.estimate_tokens_str(tokens.compact_json(envelope(k, full)))

    return envelope(tokens.largest_within(emit, size, budget, least=1), full)


@dataclass
class CompactAnswer:
    """`query_facts` under a token budget too small for even one fact's CRC-v1 envelope: the leading rows
    as fact lines (`entity · key: value · id`), as many as fit, then what was left and the budget the
    envelope needs."""

    lines: list[str]
    whole: int                   # leading lines whose value is whole (else the one line's value is cut)
    more: int                    # rows above the floor not in the lines
    envelope_tokens: int         # the least CRC-v1 envelope's tokens
    cut_value: Optional[str] = None   # the first row's value as its line carries it, when cut

    def footer(self) -> str:
        return (f"+{self.more} more · " if self.more else "") + \
            f"compact: the CRC-v1 envelope needs token_budget ≥ {self.envelope_tokens}"

    def text(self) -> str:
        return "\n".join([*self.lines, self.footer()])


def compact_answer(rows: list[dict[str, Any]], shown: int, envelope_tokens: int, budget: int) -> CompactAnswer:
    """The rows as fact lines fitting `budget` with the footer (counted as the agent receives the text, a
    JSON string); `shown`: the rows above the floor."""
    answer = CompactAnswer([], 0, shown, envelope_tokens)

    def line(i: int, value: Optional[str]) -> str:
        r = rows[i]
        return fact_line(r["entity"], r["key"], r["value"] if value is None else value, r["fact_id"])

    def cost(lines: list[str]) -> int:
        answer.lines, answer.more = lines, shown - len(lines)
        return tokens.estimate_tokens(answer.text())

    lines = fitted(len(rows), line, lambda i: rows[i]["value"], cost, budget)
    cost(lines)
    answer.whole = len(lines) if not lines or lines[0] == line(0, None) else 0
    if lines and not answer.whole:
        first = rows[0]
        answer.cut_value = lines[0][len(fact_line(first["entity"], first["key"], "")):-len(f" · {first['fact_id']}")]
    return answer


@dataclass
class BootstrapResult:
    topic: Optional[str]          # as given
    prefix: str
    facts: list[dict[str, Any]]   # {fact_id, entity, key, value, confidence, tokens}
    matched: int
    left_out: int
    total_tokens: int
    token_budget: Optional[int]

    def text(self) -> str:
        if not self.facts:
            if self.topic is not None:
                return f"no bootstrap knowledge for topic '{self.topic}'"
            return "no bootstrap knowledge found"
        return "\n".join(f"[{f['entity']}] {f['key']} = {f['value']}" for f in self.facts)

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "prefix": self.prefix, "facts": self.facts, "matched": self.matched,
                "returned": len(self.facts), "left_out": self.left_out, "total_tokens": self.total_tokens,
                "token_budget": self.token_budget, "text": self.text()}


@dataclass
class MemoryViewResult:
    facts: list[dict[str, Any]]   # {id, entity, key, value, version, stored_at, confidence, pinned, source_receipt, actor}
    total_tokens: int
    matched: int
    left_out: int
    token_budget: int
    top_k: int
    capped: bool = False          # more than MEMORY_VIEW_COUNT_CAP matched: `matched`/`left_out` are lower bounds
    fact_tokens: list[int] = field(default_factory=list)   # each fact's `tokens`, what Crux's budget counts

    def first(self, n: int) -> "MemoryViewResult":
        """The first `n` facts alone: the answer cut further, by Crux's rule, to fit a budget on the wire."""
        return replace(self, facts=self.facts[:n], fact_tokens=self.fact_tokens[:n],
                       total_tokens=sum(self.fact_tokens[:n]), left_out=self.matched - n)

    def text(self) -> str:
        if not self.facts:
            return "no memory visible"
        # ` [superseded]` is cruxsql's: Crux lists a retired version beside the current one unmarked
        return "\n".join(f"[{f['entity']}] {f['key']} = {f['value']} (id={f['id']}, v{f['version']})"
                         + (" [pinned]" if f["pinned"] else "") + (" [superseded]" if f.get("superseded_by") else "")
                         for f in self.facts)

    def crux_payload(self) -> dict[str, Any]:
        """The Crux `memory_view` result: text lines plus `{facts, total_tokens, returned}`."""
        return {"content": [{"type": "text", "text": self.text()}],
                "structuredContent": {"facts": self.facts, "total_tokens": self.total_tokens,
                                      "returned": len(self.facts)}}

    def to_dict(self) -> dict[str, Any]:
        return {"facts": self.facts, "total_tokens": self.total_tokens, "returned": len(self.facts),
                "matched": self.matched, "left_out": self.left_out, "capped": self.capped,
                "token_budget": self.token_budget, "top_k": self.top_k}


# --- SQL building ---------------------------------------------------------------------------------

@dataclass
class _Plan:
    where: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)


def _floor_ms(expr: str) -> str:
    """chrono `timestamp_millis` (floor) of an epoch-ns SQL expression."""
    return f"(({expr}) - ((({expr}) % 1000000) + 1000000) % 1000000) / 1000000"


def _on_one_snapshot(read: F) -> F:
    """Run a Recall read in `_one_snapshot`."""
    @functools.wraps(read)
    def run(self: "Recall", *args: Any, **kwargs: Any) -> Any:
        with self._one_snapshot():
            return read(self, *args, **kwargs)
    return run  # type: ignore[return-value]


class Recall:
    """query_facts / get_bootstrap / memory_view over one store."""

    def __init__(self, store: Store, refresh: bool = True, policy: Optional[DecayPolicy] = None,
                 embedder: Optional[Embedder] = None) -> None:
        """`embedder`: with one, `get_bootstrap` ranks by 0.6·cosine + 0.4·confidence as Crux's store does."""
        self.store = store
        self.embedder = embedder
        self.db: apsw.Connection = store.db
        self.refresh = refresh
        self.policy = policy
        self.index = TextIndex(self.db)
        self.timeline = Timeline(self.db, store.journal)
        self._reads: Optional[ExitStack] = None  # the snapshot of the read in progress (`_one_snapshot`)
        self._after_read: list[Callable[[], None]] = []
        self.search_cache: dict[str, Any] = {}   # the ranked recall's embedder and vector matrix (relevance.py)

    # --- shared plumbing --------------------------------------------------------------------------

    @contextmanager
    def _one_snapshot(self) -> Iterator[None]:
        """Around a read: `_prepare` opens a read snapshot once the derived tables are caught up, and
        writes the read makes (access counts) wait until it has ended. Nested reads share it."""
        if self._reads is not None:
            yield
            return
        self._reads, after = ExitStack(), []
        try:
            with self._reads:
                yield
            after = self._after_read
        finally:
            self._reads, self._after_read = None, []
        for write in after:
            write()

    def _prepare(self, known_at: Optional[int] = None) -> None:
        if self.store.in_snapshot:
            return  # a read nested in another: its snapshot is already open, caught up
        if self.refresh:
            self.store.refresh()
        self.index.catch_up(scan_below=INDEX_EVERY)
        if known_at is not None:
            self.timeline.sync()
        if self._reads is not None:
            self._reads.enter_context(self.store.read_snapshot())
        self.index.open_tail()

    def _decay(self) -> DecayPolicy:
        return self.policy or DecayPolicy.from_env()

    @staticmethod
    def _attr_exprs(known_at: Optional[int]) -> dict[str, str]:
        """SQL for each mutable attribute: the current column, or its value at transaction time :T."""
        if known_at is None:
            return {"deleted": "f.deleted", "superseded_by": "f.superseded_by", "valid_from": "f.valid_from_ns",
                    "valid_to": "f.valid_to_ns", "horizon": "f.horizon_class", "reverified": "f.reverified_at_ns"}

        def at_t(attr: str, col: str, current: str) -> str:
            # an attribute with no rows never changed: its current column is its value at every T
            changes = f"FROM recall_changes c WHERE c.fact_id = f.fact_id AND c.attr = '{attr}'"
            return (f"(CASE WHEN EXISTS (SELECT 1 {changes}) THEN (SELECT c.{col} {changes} "
                    f"AND c.at_ns <= :known_at ORDER BY c.line_no DESC LIMIT 1) ELSE {current} END)")

        # A compaction bakes `superseded_by` into the store line, so a fact can look superseded from
        # birth: it only counts once its successor was itself stored by :T.
        successor = at_t("superseded_by", "v_text", "f.superseded_by")
        superseded_by = (f"(CASE WHEN (SELECT e.at_ns FROM facts g JOIN recall_event_times e ON e.line_no = g.line_no "
                         f"WHERE g.fact_id = {successor}) > :known_at THEN NULL ELSE {successor} END)")
        return {"deleted": at_t("deleted", "v_int", "f.deleted"),
                "superseded_by": superseded_by,
                "valid_from": at_t("validity", "v_int", "f.valid_from_ns"),
                "valid_to": at_t("validity", "v_int2", "f.valid_to_ns"),
                "horizon": at_t("horizon", "v_text", "f.horizon_class"),
                "reverified": at_t("reverified", "v_int", "f.reverified_at_ns")}

    @staticmethod
    def _unstretched_freshness_sql(policy: DecayPolicy, now_ms: int) -> Optional[tuple[str, dict[str, int]]]:
        """The same decision for rows without access counts (ac = 0, factor 1.0), as plain comparisons of
        the anchor's nanoseconds with bounds computed here once per query: floor_ms(a) <= 0 iff a < 10^6,
        floor_ms(a) > now_ms iff a >= (now_ms + 1) * 10^6, now_ms - floor_ms(a) > thr iff
        a < (now_ms - thr) * 10^6. A scan evaluates it per matching fact: the general expression costs
        as much as the scan itself. None when a bound leaves 64 bits (then the general one is used)."""
        if now_ms <= 0:
            return None
        params = {"fr_unknown": (now_ms + 1) * 1_000_000}
        for hz in ("volatile", "medium", "stable"):
            base = policy.base_ms(hz)
            assert base is not None  # the three classes with a horizon
            as_real = float(base) * 1.0  # SQLite: CAST(base * 1.0 AS INTEGER), saturating
            thr = _I64_MAX if as_real >= 9.223372036854775807e18 else max(int(as_real), -_I64_MAX - 1)
            params[f"fr_{hz}"] = (now_ms - thr) * 1_000_000
        if any(not -_I64_MAX - 1 <= v <= _I64_MAX for v in params.values()):
            return None
        return ("(CASE WHEN hz = 'none' THEN 'fresh' WHEN coalesce(rv, stored_at_ns) < 1000000 "
                "OR coalesce(rv, stored_at_ns) >= :fr_unknown THEN 'unknown' WHEN coalesce(rv, stored_at_ns) < "
                "(CASE hz WHEN 'volatile' THEN :fr_volatile WHEN 'medium' THEN :fr_medium ELSE :fr_stable END) "
                "THEN 'stale' ELSE 'fresh' END)", params)

    def _freshness_sql(self, policy: DecayPolicy) -> str:
        """`apply_at_chrono_salient` over the inner columns (hz, rv, stored_at_ns, ac) at :now_ms, in SQL,
        so that ranking, the floor and the returned rows all use one computation."""
        anchor = _floor_ms("coalesce(rv, stored_at_ns)")
        base = (f"(CASE hz WHEN 'volatile' THEN {policy.base_ms('volatile')} WHEN 'medium' THEN "
                f"{policy.base_ms('medium')} WHEN 'stable' THEN {policy.base_ms('stable')} END)")
        factor = "(CASE WHEN ac > 0 THEN min(max(1.0 + 0.25 * ln(ac + 1), 1.0), 4.0) ELSE 1.0 END)"
        return (f"(CASE WHEN hz = 'none' THEN 'fresh' "
                f"WHEN {anchor} <= 0 OR :now_ms <= 0 OR {anchor} > :now_ms THEN 'unknown' "
                f"WHEN :now_ms - {anchor} > min(CAST({base} * {factor} AS INTEGER), 9223372036854775807) "
                f"THEN 'stale' ELSE 'fresh' END)")

    def _inner_sql(self, known_at: Optional[int], static_where: list[str], salience: bool = True,
                   scan: bool = False) -> str:
        """The per-fact columns recall ranks by. `scan`: every fact is a candidate, so read `facts` in
        table order (NOT INDEXED): the planner otherwise walks the live-facts partial index, which
        visits the same rows in random order (3x an `instr()` scan at 1M facts). `facts` is the outer
        loop (CROSS JOIN): recall_text has no index of its own; driven from it, every candidate's text row
        was read before its tenant was judged (184 against 139 ms for a common word at 1M facts)."""
        a = self._attr_exprs(known_at)
        where = list(static_where)
        if known_at is not None:
            where.append("(SELECT e.at_ns FROM recall_event_times e WHERE e.line_no = f.line_no) <= :known_at")
        return (
            "SELECT f.seq AS seq, f.fact_id AS fact_id, f.tenant_hash AS tenant_hash, f.entity AS entity, "
            "f.key AS key, f.value AS value, f.confidence AS confidence, f.stored_at_ns AS stored_at_ns, "
            "f.tokens AS tokens, f.private AS private, f.actor AS actor, f.version AS version, "
            "f.source_receipt AS source_receipt, t.owner AS owner, t.visible_entity AS visible_entity, "
            f"f.access_count{' + coalesce(s.access_count, 0)' if salience else ''} AS ac, {a['deleted']} AS deleted, "
            f"{a['superseded_by']} AS superseded_by, {a['valid_from']} AS valid_from, {a['valid_to']} AS valid_to, "
            f"{a['horizon']} AS hz, {a['reverified']} AS rv "
            f"FROM facts f{' NOT INDEXED' if scan else ''} CROSS JOIN recall_text t ON t.seq = f.seq "
            + ("LEFT JOIN recall_salience s ON s.fact_id = f.fact_id" if salience else "")
            + (" WHERE " + " AND ".join(where) if where else "")
        )

    @staticmethod
    def _entity_filters(plan: _Plan, agent: Optional[str], entity: Optional[str],
                        entity_prefix: Optional[str]) -> None:
        if entity_prefix is not None and entity_prefix != "":
            plan.params["ep"] = entity_prefix
            hi = scope.prefix_upper_bound(entity_prefix)
            ranges = ["(f.entity >= :ep" + (" AND f.entity < :ep_hi)" if hi is not None else ")")]
            plan.params["ep_hi"] = hi
            if agent is not None:
                aprefix = scope.owner_entity(agent, entity_prefix)
                plan.params["aep"], plan.params["aep_hi"] = aprefix, scope.prefix_upper_bound(aprefix)
                ranges.append("(f.entity >= :aep AND f.entity < :aep_hi)")
            plan.where.append("(" + " OR ".join(ranges) + ")")
        if entity is not None:
            plan.params["ent"] = entity
            if agent is not None:
                plan.params["aent"] = scope.owner_entity(agent, entity)
                plan.where.append("f.entity IN (:ent, :aent)")
            else:
                plan.where.append("f.entity = :ent")

    @staticmethod
    def _add_or_match(plan: _Plan, terms: list[str]) -> None:
        """The exact OR-match: any term a substring of the lowercased value, key or visible entity."""
        clauses = []
        for i, term in enumerate(terms):
            plan.params[f"q{i}"] = term
            clauses.append(
                f"instr(coalesce(t.lc_value, f.value), :q{i}) > 0 OR instr(coalesce(t.lc_key, f.key), :q{i}) > 0 "
                f"OR instr(coalesce(t.lc_entity, f.entity), :q{i}) > 0")
        plan.where.append("(" + " OR ".join(clauses) + ")")

    def _match_filter(self, plan: _Plan, terms: list[str]) -> Optional[str]:
        """The OR-match over lowercased value/key/visible entity; returns how candidates were found."""
        self._add_or_match(plan, terms)
        total = self.db.execute("SELECT max(seq) FROM facts").get or 0
        candidates = self.index.candidates(terms, limit=max(1000, int(_SCAN_SHARE * total)))
        if candidates is None:
            return "scan"
        if not len(candidates):
            plan.where.append("0")
            return "trigram"
        plan.params["cand"] = apsw.carray(np.ascontiguousarray(candidates, dtype=np.int64))
        plan.where.append(_CANDIDATES)
        if "ent" not in plan.params and "ep" not in plan.params:
            # The tenant without the unary plus as well: each candidate is then judged by tenant (and
            # liveness) from facts_seq_scope, its row read only when it passes (migration 0037). Not
            # beside an entity filter: the planner then walked the tenant's whole entity range in
            # facts_chain instead of the entity's own index (10x slower at 100k facts).
            plan.where.append(_TENANT_IN_INDEX)
        return "trigram"

    def _rank_ties(self, rows: Iterable[tuple], top_k: int, tied_sql: str, params: dict[str, Any]) -> list[tuple]:
        """The first `top_k` matches in ranking order (eff, stored_at_ns descending, then fact id) as
        (seq, eff, None), from the top_k + 1 best by (eff, stored_at_ns) in any order among equals. When
        the last two of those are equal, more matches may tie with them: `tied_sql` reads every match
        stored at that time (an index lookup)."""
        rows = list(rows)
        if top_k <= 0:
            return []
        if len(rows) > top_k and rows[top_k][1:] == rows[top_k - 1][1:]:
            eff, at = rows[top_k - 1][1:]
            rows = [r for r in rows if r[1:] > (eff, at)]
            rows += [r for r in self.db.execute(tied_sql, {**params, "tied_at": at}) if r[1] == eff]
        return self._rank(rows, top_k)

    def _rank(self, rows: list[tuple], top_k: int) -> list[tuple]:
        """The first `top_k` of (seq, eff, stored_at_ns) rows in ranking order (eff, stored_at_ns
        descending, then fact id), as (seq, eff, None)."""
        ids = dict(self.db.execute("SELECT seq, fact_id FROM facts WHERE seq IN carray(?)",
                                   (apsw.carray(np.array([r[0] for r in rows], dtype=np.int64)),))) if rows else {}
        rows.sort(key=lambda r: (-r[1], -r[2], ids[r[0]]))
        return [(seq, eff, None) for seq, eff, _ in rows[:top_k]]

    def _probe_bound(self, matched_sql_where: Callable[[list[str]], str], plan: _Plan,
                     top_k: int) -> Optional[tuple[float, int]]:
        """A lower bound of the top_k-th best (eff, stored_at_ns) of a scan's matches: the top_k-th best
        among the matches in the newest facts (a subset's k-th best never ranks above the whole set's).
        None when those hold fewer than top_k matches (a rare term: then copying its matches is cheap).
        With it, a scan is one aggregate pass (count, and the seqs at or above the bound) instead of a
        copy of every match to rank: 1.6x an instr() scan for a term in half of 1M facts before, ~1.3x."""
        total = self.db.execute("SELECT max(seq) FROM facts").get or 0  # ~ the fact count, from an index
        newest = ("f.rowid IN (SELECT rowid FROM facts INDEXED BY facts_stored_at "
                  "ORDER BY stored_at_ns DESC LIMIT :probe_facts)")
        return self.db.execute(
            f"SELECT eff, stored_at_ns FROM ({matched_sql_where(plan.where + [newest])}) "
            f"ORDER BY eff DESC, stored_at_ns DESC LIMIT 1 OFFSET :probe_k",
            {**plan.params, "probe_facts": max(_PROBE_MIN, total // _PROBE_SHARE), "probe_k": top_k - 1}).fetchone()

    # --- the visibility pipeline (query_facts and the ranked `recall` share it) ----------------------

    def _visibility_plan(self, tenant: str, agent: Optional[str], now_ns: int, entity: Optional[str],
                         entity_prefix: Optional[str]) -> _Plan:
        """The tenant, agent-scope and entity conditions on `facts f JOIN recall_text t`."""
        plan = _Plan(params={"tenant": tenant, "agent": agent, "now_ms": ns_to_ms(now_ns)})
        plan.where.append("+f.tenant_hash = :tenant")  # never drive the plan from the tenant
        plan.where.append("((t.owner IS NULL AND f.private = 0) OR t.owner = :agent)")
        self._entity_filters(plan, agent, entity, entity_prefix)
        return plan

    def _visible_sql(self, plan: _Plan, policy: DecayPolicy, known_ns: Optional[int], as_of_ns: Optional[int],
                     include_superseded: bool) -> Callable[..., str]:
        """`where -> SQL` of the facts passing `where` that are visible: not deleted, valid at `as_of`, not
        superseded (unless included), as the store believed at `known_at`; with their freshness `fr` and
        effective confidence `eff` (the inner columns of `_inner_sql` besides)."""
        outer = ["deleted = 0"]
        if as_of_ns is not None:
            plan.params["as_of"] = as_of_ns
            outer.append("(valid_from IS NULL OR valid_from <= :as_of) AND (valid_to IS NULL OR :as_of < valid_to)")
        if not include_superseded:
            outer.append("superseded_by IS NULL")
        if known_ns is not None:
            plan.params["known_at"] = known_ns
        # salience counts only exist once an access was recorded: skip the per-row lookup until then
        salience = self.db.execute("SELECT 1 FROM recall_salience LIMIT 1").fetchone() is not None

        freshness = self._freshness_sql(policy)
        unstretched = self._unstretched_freshness_sql(policy, plan.params["now_ms"])
        if unstretched is not None:
            freshness = f"(CASE WHEN ac > 0 THEN {freshness} ELSE {unstretched[0]} END)"
            plan.params.update(unstretched[1])

        def matched_sql_where(where: list[str], scan: bool = False) -> str:
            return (f"SELECT *, CASE WHEN fr = 'stale' THEN confidence * {STALE_DEMOTION_FACTOR} "
                    f"ELSE confidence END AS eff FROM (SELECT *, {freshness} AS fr "
                    f"FROM ({self._inner_sql(known_ns, where, salience, scan)}) WHERE {' AND '.join(outer)})")
        return matched_sql_where

    def search(self, text: str, **options: Any) -> "RecallResult":
        """Relevance-ranked recall (BM25 over the facts' words, optionally fused with their embeddings),
        through the same visibility pipeline as `query_facts`. See `relevance.search` for the options.
        Its time filters also take dates and phrases (`yesterday`, `last week`; facts/time_phrases.py),
        days starting in `time_zone` (an IANA name), else the server's (`time_phrases.resolve_all` with
        the same arguments says what each was read as). `query_facts` keeps Crux's RFC 3339 only."""
        from .relevance import search

        time_zone = options.pop("time_zone", None)
        written = {name: options[name] for name in SEARCH_TIMES if isinstance(options.get(name), str)}
        resolved = time_phrases.resolve_all(written, zone=time_zone, now_ns=_time_arg(options.get("now"), "now"))
        instants = {name: options[name] for name in SEARCH_TIMES if isinstance(options.get(name), int)}
        instants.update({name: r.ns for name, r in resolved.items()})
        # compared with the view's *_ns columns: an instant past year 2262 is the column's end
        return search(self, text, **{**options, **{name: timestamps.column_ns(ns) for name, ns in instants.items()}})

    # --- query_facts ------------------------------------------------------------------------------

    @_on_one_snapshot
    def query_facts(self, query: Optional[str] = None, *, entity: Optional[str] = None,
                    entity_prefix: Optional[str] = None, tenant: Optional[str] = None, agent: Optional[str] = None,
                    top_k: Optional[int] = DEFAULT_TOP_K, token_budget: Optional[int] = None,
                    min_effective_confidence: Optional[float] = None, as_of: TimeArg = None,
                    known_at: TimeArg = None, include_superseded: bool = False, contract: Optional[str] = "crc-v1",
                    record_access: Optional[bool] = None, now: TimeArg = None, shaped: bool = True) -> QueryResult:
        """Crux `query_facts`, plus `known_at` transaction-time travel. See the module docstring.

        `shaped=False` is the savings holdout's control arm: a token budget is applied by the legacy
        greedy drop even under CRC-v1, instead of the reversible envelope. Its statements read one
        snapshot: a write or a compaction landing meanwhile is either wholly seen or not at all."""
        top_k = DEFAULT_TOP_K if top_k is None else _count_arg(top_k, "top_k")
        token_budget = _count_arg(token_budget, "token_budget")
        floor = _floor_arg(min_effective_confidence)
        as_of_ns = _time_arg(as_of, "as_of")
        known_ns = _time_arg(known_at, "known_at")
        now_arg = _time_arg(now, "now")
        if query is not None and not isinstance(query, str):
            raise InvalidInput(f"query must be a string, got {query!r}")
        agent = scope.normalize_agent(agent)
        tenant_name = scope.normalize_tenant(tenant)
        use_crc = crc_v1.enabled(contract)
        contract_name = "crc-v1" if use_crc else "legacy"
        if now_arg is None:
            now_arg = timestamps.now_ns()
            if known_ns is not None:
                now_arg = min(now_arg, known_ns)
        self._prepare(known_ns)
        policy = self._decay()

        result = QueryResult([], 0, 0, 0, 0, contract_name, token_budget, top_k,
                             known_at=None if known_ns is None else timestamps.format_fact_time(known_ns),
                             as_of=None if as_of_ns is None else timestamps.format_fact_time(as_of_ns))
        terms = scope.split_terms(query) if query is not None else None
        if terms is not None and not terms:
            return result  # Crux: a blank query has no terms and matches nothing

        plan = self._visibility_plan(tenant_name, agent, now_arg, entity, entity_prefix)
        plan.params["floor"] = floor if floor is not None else -1.0
        found = self._match_filter(plan, terms) if terms else "scan"
        scan = found == "scan" and entity is None and not entity_prefix
        matched_sql_where = self._visible_sql(plan, policy, known_ns, as_of_ns, include_superseded)
        matched_sql = matched_sql_where(plan.where, scan)
        reversible = use_crc and token_budget is not None and shaped
        legacy_budget = token_budget is not None and not reversible
        # One pass over the matches: they are materialised once, narrow (no text), then counted and
        # ranked from that copy; the counts row comes first. A window count over the wide rows would
        # buffer every matching value and sort it (6x a plain scan when a short term matches half the
        # facts). The LIMIT keeps SQLite from flattening the ranked subquery and dropping its order.
        # Rows below the floor sort last, so top_k rows are enough unless a legacy budget decides. For
        # top_k, the copy holds three numbers per match and SQLite ranks by them alone: with a fact id per
        # row it was ~0.2x an instr() scan slower to write and sort at 1M facts; `_rank_ties` settles
        # the order among equals by fact id.
        below = "coalesce(sum(eff < :floor), 0)" if floor is not None else "0"
        bound = self._probe_bound(matched_sql_where, plan, top_k) if scan and not legacy_budget and top_k > 0 else None
        if bound is not None:
            # a scan: one aggregate pass counts every match and lists the few at or above the bound
            plan.params["bound_eff"], plan.params["bound_at"] = bound
            # (a row value names eff once: SQLite would compute the flattened expression per mention)
            sql = (f"SELECT NULL, count(*), {below}, group_concat(seq) FILTER (WHERE (eff, stored_at_ns) >= "
                   f"(:bound_eff, :bound_at)) FROM ({matched_sql})")
        elif legacy_budget:
            plan.params["limit"] = -1
            sql = (f"WITH m AS MATERIALIZED (SELECT seq, eff, stored_at_ns, fact_id, tokens FROM ({matched_sql})) "
                   f"SELECT NULL, count(*), {below} FROM m UNION ALL "
                   f"SELECT * FROM (SELECT seq, eff, tokens FROM m ORDER BY eff DESC, stored_at_ns DESC, fact_id "
                   f"LIMIT :limit)")
        else:
            plan.params["limit"] = top_k + 1
            sql = (f"WITH m AS MATERIALIZED (SELECT seq, eff, stored_at_ns FROM ({matched_sql})) "
                   f"SELECT NULL, count(*), {below} FROM m UNION ALL "
                   f"SELECT * FROM (SELECT seq, eff, stored_at_ns FROM m ORDER BY eff DESC, stored_at_ns DESC "
                   f"LIMIT :limit)")
        self.last_sql = (sql, plan.params)  # for EXPLAIN QUERY PLAN when tuning
        cursor = self.db.execute(sql, plan.params)
        if bound is not None:
            _, result.matched, result.filtered_below_threshold, listed = next(cursor)
            seqs = np.array([int(x) for x in listed.split(",")] if listed else [], dtype=np.int64)
            ranked: Iterable[tuple] = self._rank(self.db.execute(
                f"SELECT seq, eff, stored_at_ns FROM ({matched_sql_where(_among(plan.where, 'listed'))})",
                {**plan.params, "listed": apsw.carray(seqs)}).fetchall() if len(seqs) else [], top_k)
        elif legacy_budget:
            _, result.matched, result.filtered_below_threshold = next(cursor)
            ranked = cursor
        else:
            _, result.matched, result.filtered_below_threshold = next(cursor)
            tied_sql = (f"SELECT seq, eff, stored_at_ns FROM "
                        f"({matched_sql_where(plan.where + ['f.stored_at_ns = :tied_at'])})")
            ranked = self._rank_ties(cursor, top_k, tied_sql, plan.params)
        picked_seqs: list[int] = []
        used = 0
        for seq, eff, cost in ranked:
            if floor is not None and eff < floor:
                break
            if legacy_budget:
                if picked_seqs and used + cost > token_budget:
                    break
                picked_seqs.append(seq)
                used += cost
                if used >= token_budget:
                    break
            else:
                picked_seqs.append(seq)
        cursor.close()
        picked: list[tuple] = []
        if picked_seqs:
            plan.params["picked"] = apsw.carray(np.array(picked_seqs, dtype=np.int64))
            by_seq = {r[0]: r for r in self.db.execute(
                f"SELECT seq, fact_id, entity, key, value, confidence, stored_at_ns, tokens, actor, owner, "
                f"visible_entity, fr, superseded_by, hz, rv, eff FROM "
                f"({matched_sql_where(_among(plan.where, 'picked'))})", plan.params)}
            picked = [by_seq[seq] for seq in picked_seqs]
        result.left_out = result.matched - result.filtered_below_threshold - len(picked)
        rows = []
        for r in picked:
            anchor_ns = r[14] if r[14] is not None else r[6]
            rows.append({
                "fact_id": r[1],
                "entity": r[10] if r[9] is not None else r[2],
                "key": r[3], "value": r[4], "confidence": r[5], "effective_confidence": r[15],
                "horizon_class": r[13], "freshness": r[11], "age_hours": age_hours(anchor_ns, now_arg),
                "superseded_by": r[12], "actor": r[8],
            })
        result.rows = rows
        result.total_tokens = sum(r[7] for r in picked)
        if use_crc and rows:
            if reversible:
                assert token_budget is not None  # `reversible` says so
                result.entity, result.query, result.row_tokens = entity, query, [r[7] for r in picked]
                result = result.reshaped(token_budget)
            else:
                result.crc_v1 = crc_v1.wrap_facts(rows, entity, query)
        elif rows and token_budget is not None and not use_crc:
            # the legacy lines count in full against the budget, not only the values (first fact always)
            kept = tokens.largest_within(len(rows), lambda k: tokens.estimate_tokens_str(_legacy_text(rows[:k])),
                                         token_budget, least=1)
            result.left_out += len(rows) - kept
            result.total_tokens = sum(r[7] for r in picked[:kept])
            result.rows = rows = rows[:kept]
        if rows and known_ns is None and (salience_enabled() if record_access is None else record_access):
            self.record_access([r["fact_id"] for r in rows], now_arg)
        return result

    # --- salience ---------------------------------------------------------------------------------

    def record_access(self, fact_ids: list[str], at_ns: Optional[int] = None) -> None:
        """`record_access`: access_count += 1 and last_accessed_at = now, in the view only (after the
        read in progress, if any, has left its snapshot)."""
        at_ns = timestamps.now_ns() if at_ns is None else at_ns
        if self._reads is not None:
            self._after_read.append(lambda: self.record_access(fact_ids, at_ns))
            return
        with self.db:
            self.db.executemany(
                "INSERT INTO recall_salience (fact_id, access_count, last_accessed_at_ns) "
                "SELECT fact_id, 1, ? FROM facts WHERE fact_id = ? AND deleted = 0 "
                "ON CONFLICT (fact_id) DO UPDATE SET access_count = min(access_count + 1, 4294967295), "
                "last_accessed_at_ns = excluded.last_accessed_at_ns",
                [(at_ns, fid) for fid in fact_ids])

    def access_counts(self) -> dict[str, int]:
        """Recall counts per fact (`CORECRUXD_MEMORY_SALIENCE`), kept in the view, never journaled."""
        return dict(self.db.execute("SELECT fact_id, access_count FROM recall_salience"))

    # --- get_bootstrap ----------------------------------------------------------------------------

    def get_bootstrap(self, topic: Optional[str] = None, query: Optional[str] = None,
                      token_budget: Optional[int] = None, *, tenant: Optional[str] = None,
                      agent: Optional[str] = None) -> BootstrapResult:
        """Crux `get_bootstrap` (tools/facts.rs) with its defects fixed: the budget is honoured (greedy fill by
        fact tokens, first fact always), the tenant is applied, and agent scope is enforced: only the
        daemon-owned `__bootstrap__::` namespace itself (born private) and the caller's own
        `__agent::<me>::__bootstrap__::...` facts are readable; no other private fact is.

        Ranking is the store query's: confidence desc, stored_at desc, fact_id; at most 100 facts. With an
        embedder and a query, no keyword filter: 0.6·cosine(query, "{entity} {key} {value}") + 0.4·confidence.
        Deleted facts are dropped; superseded ones are not (as in Crux's store query). The topic is
        normalised by `normalize_topic`; a blank topic builds the prefix `__bootstrap__:::` and so
        matches nothing, as in Crux. Topic `tool-output` appends the synthesized CRC-v1 schema
        catalogue (`crc_v1.tool_output_catalogue`, `fact_id` None) after the stored facts.
        """
        token_budget = _count_arg(token_budget, "token_budget")
        agent = scope.normalize_agent(agent)
        tenant_name = scope.normalize_tenant(tenant)
        norm = normalize_topic(topic)
        prefix = f"{BOOTSTRAP_PREFIX}{norm}:" if norm is not None else BOOTSTRAP_PREFIX
        self._prepare()
        catalogue: list[dict[str, Any]] = [{"fact_id": None, "entity": e, "key": k, "value": v, "confidence": None,
                      "tokens": token_cost(v)}
                     for e, k, v in crc_v1.tool_output_catalogue()] if norm == "tool-output" else []
        empty = BootstrapResult(topic, prefix, catalogue, 0, 0, sum(f["tokens"] for f in catalogue), token_budget)
        terms = scope.split_terms(query) if query is not None else None
        if terms is not None and not terms:
            return empty
        plan = _Plan(params={"tenant": tenant_name, "agent": agent})
        plan.where += ["+f.tenant_hash = :tenant", "f.deleted = 0",
                       "((t.owner IS NULL AND (f.private = 0 OR (f.entity >= :bp AND f.entity < :bp_hi))) "
                       "OR t.owner = :agent)"]
        plan.params["bp"], plan.params["bp_hi"] = BOOTSTRAP_PREFIX, scope.prefix_upper_bound(BOOTSTRAP_PREFIX)
        self._entity_filters(plan, agent, None, prefix)
        dense = self.embedder is not None and bool(terms)
        if terms and not dense:
            self._match_filter(plan, terms)
        sql = (f"SELECT f.fact_id, f.entity, t.owner, t.visible_entity, f.key, f.value, f.confidence, f.tokens, "
               f"count(*) OVER (), f.stored_at_ns FROM facts f JOIN recall_text t ON t.seq = f.seq "
               f"WHERE {' AND '.join(plan.where)} ORDER BY f.confidence DESC, f.stored_at_ns DESC, f.fact_id"
               + ("" if dense else f" LIMIT {BOOTSTRAP_TOP_K}"))
        ranked: list[tuple[Any, ...]] = self.db.execute(sql, plan.params).fetchall()
        if dense and ranked and self.embedder is not None:
            # Crux's store query with an embedder: no keyword filter; 0.6·cosine + 0.4·confidence, then stored_at.
            vectors = fact_vectors(self.db, self.embedder, [(r[0], r[1], r[4], r[5]) for r in ranked])
            scores = dense_scores(self.embedder.embed_one(query or ""), [vectors[r[0]] for r in ranked],
                                  [r[6] for r in ranked])
            order = sorted(range(len(ranked)), key=lambda i: (-scores[i], -ranked[i][9], ranked[i][0]))
            ranked = [ranked[i] for i in order[:BOOTSTRAP_TOP_K]]
        if not ranked:
            return empty
        matched = ranked[0][8]
        n = tokens.legacy_fill([r[7] for r in ranked], token_budget) if token_budget is not None else len(ranked)
        facts = [{"fact_id": r[0], "entity": r[3] if r[2] is not None else r[1], "key": r[4], "value": r[5],
                  "confidence": r[6], "tokens": r[7]} for r in ranked[:n]]
        facts += catalogue
        return BootstrapResult(topic, prefix, facts, matched, matched - n, sum(f["tokens"] for f in facts),
                               token_budget)

    # --- memory_view ------------------------------------------------------------------------------

    @_on_one_snapshot
    def memory_view(self, entity: Optional[str] = None, key: Optional[str] = None, top_k: Optional[int] = 20,
                    token_budget: Optional[int] = 2000, *, tenant: Optional[str] = None,
                    agent: Optional[str] = None) -> MemoryViewResult:
        """Crux `memory_view` (tools/memory.rs): visible, non-deleted facts (superseded included) whose visible
        entity is outside the panel's reserved prefixes, newest first (then confidence desc, fact_id),
        cut at `top_k` (at least 1) and the token budget (first fact always), with the caller's pins.
        The tenant is applied (the described Crux version has none)."""
        top_k = 20 if top_k is None else max(1, _count_arg(top_k, "top_k"))
        token_budget = 2000 if token_budget is None else _count_arg(token_budget, "token_budget")
        agent = scope.normalize_agent(agent)
        tenant_name = scope.normalize_tenant(tenant)
        self._prepare()
        plan = _Plan(params={"tenant": tenant_name, "agent": agent})
        plan.where += ["+f.tenant_hash = :tenant", "f.deleted = 0",
                       "((t.owner IS NULL AND f.private = 0) OR t.owner = :agent)"]
        self._entity_filters(plan, agent, entity, None)
        visible = "coalesce(t.visible_entity, f.entity)"
        if entity is not None:
            plan.where.append(f"{visible} = :ent")  # memory_view compares the visible entity only
        if key is not None:
            plan.params["key"] = key
            plan.where.append("f.key = :key")
        for i, p in enumerate(MEMORY_VIEW_RESERVED):
            plan.params[f"r{i}"] = p
            plan.where.append(f"substr({visible}, 1, {len(p)}) != :r{i}")
        where = " AND ".join(plan.where)
        base = f"FROM facts f JOIN recall_text t ON t.seq = f.seq WHERE {where}"
        # counting every visible fact would scan the whole view; counting stops past the cap
        matched = self.db.execute(f"SELECT count(*) FROM (SELECT 1 {base} LIMIT {MEMORY_VIEW_COUNT_CAP + 1})",
                                  plan.params).get
        capped = matched > MEMORY_VIEW_COUNT_CAP
        matched = min(matched, MEMORY_VIEW_COUNT_CAP)
        # walk the stored_at index newest first; ties (same stored_at) are ordered by confidence desc,
        # fact_id here, so a tie group is always read whole before the cut
        sql = (f"SELECT f.fact_id, {visible}, f.key, f.value, f.version, f.stored_at_ns, f.confidence, "
               f"f.source_receipt, f.actor, f.tokens, f.superseded_by, f.stored_at {base} "
               f"ORDER BY f.stored_at_ns DESC, f.fact_id DESC")
        ordered: list[tuple] = []
        group: list[tuple] = []
        for r in self.db.execute(sql, plan.params):
            if group and r[5] != group[0][5]:
                ordered += sorted(group, key=lambda x: (-x[6], x[0]))
                group = []
                if len(ordered) >= top_k:
                    break
            group.append(r)
        ordered += sorted(group, key=lambda x: (-x[6], x[0]))
        picked: list[tuple] = []
        used = 0
        for r in ordered[:top_k]:
            if picked and used + r[9] > token_budget:
                break
            picked.append(r)
            used += r[9]
        pins = self._pins(agent, tenant_name, [r[0] for r in picked])
        facts = [{"id": r[0], "entity": r[1], "key": r[2], "value": r[3], "version": r[4],
                  "stored_at": timestamps.format_event_time(timestamps.from_columns(r[5], r[11])),  # a leap second,
                  "confidence": r[6], "pinned": r[0] in pins,  # a year past 2262: as written (stored_at_ns clamps)
                  "source_receipt": r[7], "actor": r[8], "superseded_by": r[10]} for r in picked]
        return MemoryViewResult(facts, used, matched, matched - len(picked), token_budget, top_k, capped,
                                [r[9] for r in picked])

    def _pins(self, agent: Optional[str], tenant: str, fact_ids: list[str]) -> set[str]:
        """Fact ids the agent pinned: the latest non-deleted `__memory_pin::<agent>::<id>` / `pinned`
        fact's value is exactly `1` or ASCII-case-insensitively `true`, untrimmed (memory.rs)."""
        if agent is None or not fact_ids:
            return set()
        pinned = set()
        for fid in fact_ids:
            row = self.db.execute(
                "SELECT value FROM facts WHERE entity = ? AND key = 'pinned' AND deleted = 0 AND tenant_hash = ? "
                "ORDER BY stored_at_ns DESC, seq DESC LIMIT 1", (f"{MEMORY_PIN_PREFIX}{agent}::{fid}", tenant)
            ).fetchone()
            if row is not None and pin_value_pinned(row[0]):
                pinned.add(fid)
        return pinned
