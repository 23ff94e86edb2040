"""The savings holdout (Crux's crates/crux-mcp/src/holdout.rs): what shaping saves, measured live.

`CRUX_OUTPUT_HOLDOUT=f` (clamped to 0..1; unset or unparseable = off) puts a deterministic fraction of
requests in the *control* arm: their answers are left unshaped (the legacy budget drop, pretty JSON)
while the rest (*treatment*) are shaped. The arm is a pure function of the request: FNV-1a 64 plus the
splitmix64 finaliser over the compact JSON of the tool-call arguments, top 53 bits as a fraction.

Two results are kept apart and always quoted by name, never as one number:
* compaction (M3): for a salted, independent sample of requests, the same payload serialised pretty and
  compact: a paired comparison, the pure serialisation saving;
* net: the control arm's emitted tokens against the treatment arm's, unpaired (different requests), which
  includes the recall cost of reversible shaping and so can be negative.
Each arm keeps its newest 5,000 samples; intervals are mean ± 1.96 standard errors.
"""

from __future__ import annotations

import json
import math
import os
from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from ..recall.tokens import compact_json, content_hash, estimate_tokens_str

HOLDOUT_ENV = "CRUX_OUTPUT_HOLDOUT"
MAX_SAMPLES_PER_ARM = 5000
Z_95 = 1.96
_EPSILON = 2.220446049250313e-16   # f64::EPSILON
_COMPACTION_SALT = ":m3"
DISABLED_TEXT = "token_savings: holdout disabled (set CRUX_OUTPUT_HOLDOUT=0.05 to sample a live control arm)"


def holdout_fraction(env: Optional[Mapping[str, str]] = None) -> float:
    """The env fraction, trimmed, parsed as a float and clamped to [0, 1]; anything else is 0 (off)."""
    env = os.environ if env is None else env
    try:
        value = float(env.get(HOLDOUT_ENV, "").strip())
    except ValueError:
        return 0.0
    return 0.0 if math.isnan(value) else min(max(value, 0.0), 1.0)


def fnv1a(key: str) -> int:
    """FNV-1a 64 over the UTF-8 bytes, then the splitmix64 finaliser (the `content_hash` function)."""
    return int(content_hash(key), 16)


def is_control(key: str, fraction: float) -> bool:
    """Control iff the key's 53-bit bucket in [0, 1) falls below the fraction."""
    if fraction <= 0:
        return False
    if fraction >= 1:
        return True
    return (fnv1a(key) >> 11) / 2.0**53 < fraction


def pretty_json(value: Any) -> str:
    """`serde_json::to_string_pretty`: 2-space indent, raw UTF-8."""
    return json.dumps(value, indent=2, ensure_ascii=False)


@dataclass(frozen=True)
class SavingsReport:
    """Savings as fractions (0.25 = 25 %), with the 95 % interval and the token sums compared."""

    n: int = 0
    reduction: float = 0.0
    ci_low: float = 0.0
    ci_high: float = 0.0
    control_tokens: int = 0
    treatment_tokens: int = 0

    def format(self, corpus: str, sha: str) -> str:
        return (f"token savings {self.reduction * 100:.1f}% (95% CI {self.ci_low * 100:.1f}\u2013"
                f"{self.ci_high * 100:.1f}%) \u00b7 n={self.n} \u00b7 control_tokens={self.control_tokens} \u00b7 "
                f"treatment_tokens={self.treatment_tokens} \u00b7 corpus={corpus} \u00b7 commit={sha}")


def _variance(xs: Sequence[float], mean: float) -> float:
    return sum((x - mean) ** 2 for x in xs) / (len(xs) - 1) if len(xs) >= 2 else 0.0


def paired_savings(control: Sequence[int], treatment: Sequence[int]) -> SavingsReport:
    """Per-pair reductions (c - t) / c over pairs with c != 0; mean ± 1.96 · SE."""
    pairs = list(zip(control, treatment))
    c_sum, t_sum = sum(c for c, _ in pairs), sum(t for _, t in pairs)
    reductions = [(c - t) / c for c, t in pairs if c != 0]
    n = len(reductions)
    if n == 0:
        return SavingsReport(0, 0.0, 0.0, 0.0, c_sum, t_sum)
    mean = sum(reductions) / n
    se = math.sqrt(_variance(reductions, mean) / n) if n >= 2 else 0.0
    return SavingsReport(n, mean, mean - Z_95 * se, mean + Z_95 * se, c_sum, t_sum)


def unpaired_savings(control: Sequence[int], treatment: Sequence[int]) -> SavingsReport:
    """1 - mean(treatment) / mean(control), with the delta-method SE of the ratio."""
    c_sum, t_sum = sum(control), sum(treatment)
    n = len(control) + len(treatment)
    if not control or not treatment:
        return SavingsReport(n, 0.0, 0.0, 0.0, c_sum, t_sum)
    mean_c, mean_t = c_sum / len(control), t_sum / len(treatment)
    if mean_c <= 0:
        return SavingsReport(n, 0.0, 0.0, 0.0, c_sum, t_sum)
    var_c, var_t = _variance(control, mean_c), _variance(treatment, mean_t)
    ratio = mean_t / mean_c
    reduction = 1.0 - ratio
    se = 0.0
    if len(control) >= 2 and len(treatment) >= 2:
        se = math.sqrt(ratio**2 * (var_t / (len(treatment) * max(mean_t, _EPSILON) ** 2)
                                   + var_c / (len(control) * mean_c**2)))
    return SavingsReport(n, reduction, reduction - Z_95 * se, reduction + Z_95 * se, c_sum, t_sum)


class Holdout:
    """The process-wide accumulator: the arm of each request and the four sample rings."""

    def __init__(self, fraction: float) -> None:
        self.fraction = fraction
        self.control: deque[int] = deque(maxlen=MAX_SAMPLES_PER_ARM)
        self.treatment: deque[int] = deque(maxlen=MAX_SAMPLES_PER_ARM)
        self.compaction: deque[tuple[int, int]] = deque(maxlen=MAX_SAMPLES_PER_ARM)  # (pretty, compact)

    @property
    def enabled(self) -> bool:
        return self.fraction > 0

    def request_is_control(self, arguments: Mapping[str, Any]) -> bool:
        """The arm of a tool call, keyed by the compact JSON of its arguments (in the order received)."""
        return self.enabled and is_control(compact_json(dict(arguments)), self.fraction)

    def record(self, arguments: Mapping[str, Any], control: bool, emitted_text: str, payload: Any) -> None:
        """One shaped-or-not answer: its emitted tokens in its arm, and a compaction pair when sampled."""
        if not self.enabled:
            return
        (self.control if control else self.treatment).append(estimate_tokens_str(emitted_text))
        key = compact_json(dict(arguments))
        if is_control(key + _COMPACTION_SALT, self.fraction):
            self.compaction.append((estimate_tokens_str(pretty_json(payload)),
                                    estimate_tokens_str(compact_json(payload))))

    def token_savings_payload(self) -> dict[str, Any]:
        """Crux's `token_savings` result: the two-line text and its fields (the stub when off)."""
        if not self.enabled:
            return {"text": DISABLED_TEXT, "fields": {"holdout_enabled": False}}
        compaction = paired_savings([p for p, _ in self.compaction], [c for _, c in self.compaction])
        net = unpaired_savings(list(self.control), list(self.treatment))
        nc, nt = len(self.control), len(self.treatment)
        if compaction.n == 0:
            compaction_line = "  compaction (M3): no samples yet"
        else:
            compaction_line = (f"  compaction (M3): {compaction.reduction * 100:.1f}% (95% CI "
                               f"{compaction.ci_low * 100:.1f}\u2013{compaction.ci_high * 100:.1f}%) \u00b7 "
                               f"n={compaction.n} \u2014 the token saving")
        if nc == 0 or nt == 0:
            net_line = f"  net (all-shaped vs unshaped): not enough samples (control={nc}, treatment={nt})"
        else:
            net_line = (f"  net (all-shaped vs unshaped): {net.reduction * 100:.1f}% (95% CI "
                        f"{net.ci_low * 100:.1f}\u2013{net.ci_high * 100:.1f}%) \u00b7 control={nc} reqs/"
                        f"{net.control_tokens} tok \u00b7 treatment={nt} reqs/{net.treatment_tokens} tok \u2014 "
                        "includes reversible's (M1) recall cost, so it can be negative")
        text = f"token_savings (holdout={self.fraction:.3f}):\n{compaction_line}\n{net_line}"
        fields = {
            "holdout_enabled": True, "holdout_fraction": self.fraction,
            "compaction": {"n": compaction.n, "reduction_pct": compaction.reduction * 100,
                           "ci95_low_pct": compaction.ci_low * 100, "ci95_high_pct": compaction.ci_high * 100,
                           "pretty_tokens": compaction.control_tokens, "compact_tokens": compaction.treatment_tokens},
            "net": {"n_control": nc, "n_treatment": nt, "reduction_pct": net.reduction * 100,
                    "ci95_low_pct": net.ci_low * 100, "ci95_high_pct": net.ci_high * 100,
                    "control_tokens": net.control_tokens, "treatment_tokens": net.treatment_tokens},
        }
        return {"text": text, "fields": fields}
