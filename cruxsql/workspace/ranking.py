"""The ranking stack of ctx_search / ctx_context: multipliers on the BM25 score.

Deterministic and additive-never-filter: every signal only reorders candidates, and each one has a
kill switch in `RankingConfig` (whose values are part of the config fingerprint). Candidates are
tiered first (files defining a queried symbol, then other files), then ordered by the product.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import Mapping, Optional

from ..documents.analyzer import normalize


@dataclass(frozen=True)
class RankingConfig:
    defines_first: bool = True
    eponymy: bool = True
    eponymy_exact: float = 1.5
    eponymy_contains: float = 1.2
    defines_boost: float = 1.5
    path_priors: bool = True
    test_prior: float = 0.6
    examples_prior: float = 0.6
    tooling_prior: float = 0.5
    vendored_prior: float = 0.4
    generated_prior: float = 0.4
    docs_prior: float = 0.8
    saturation: bool = True
    saturation_amp: float = 0.8
    graph_distance: bool = True
    graph_bonus: float = 0.5
    cochange: bool = True
    cochange_boost: float = 0.25
    cochange_floor: int = 2
    cochange_saturation: int = 8
    size_prior: bool = False
    size_amp: float = 0.2
    size_k: float = 1.0

    def as_dict(self) -> dict:
        return asdict(self)

    def with_switches(self, off: frozenset[str]) -> "RankingConfig":
        """A copy with the named boolean signals turned off (unknown names are the caller's error)."""
        values = self.as_dict()
        for name in off:
            values[name] = False
        return RankingConfig(**values)


SWITCHES = tuple(name for name, value in asdict(RankingConfig()).items() if isinstance(value, bool))
TOOLING_DIRS = frozenset({"bench", "benchmarks", "scripts", "website", "install", "tools"})
EXAMPLE_DIRS = frozenset({"examples", "example", "samples"})
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def identifier_parts(word: str) -> list[str]:
    """`parseHeader_v2` → ["parse", "header", "v", "2"] (lowercased camel/snake pieces)."""
    return [p.lower() for piece in word.split("_") for p in _CAMEL.findall(piece)]


def stem_terms(path: str) -> set[str]:
    """The analyzer terms of a file's stem split into identifier parts, plus the whole stem."""
    stem = PurePosixPath(path).stem
    return {normalize(part) for part in identifier_parts(stem)} | {normalize(stem.replace("_", ""))}


def path_prior(path: str, path_class: str, config: RankingConfig) -> float:
    if not config.path_priors:
        return 1.0
    parts = set(PurePosixPath(path).parts[:-1])
    if path_class == "vendored":
        return config.vendored_prior
    if path_class == "generated":
        return config.generated_prior
    if path_class == "test":
        return config.test_prior
    if parts & EXAMPLE_DIRS:
        return config.examples_prior
    if parts & TOOLING_DIRS:
        return config.tooling_prior
    if path_class == "docs":
        return config.docs_prior
    return 1.0


def eponymy(path: str, query_terms: list[str], config: RankingConfig) -> float:
    if not config.eponymy or not query_terms:
        return 1.0
    stem = PurePosixPath(path).stem.lower().replace("_", "")
    joined = "".join(query_terms)
    if joined == stem or set(query_terms) <= stem_terms(path):
        return config.eponymy_exact
    if any(len(term) >= 3 and term in stem for term in query_terms):
        return config.eponymy_contains
    return 1.0


def saturation(count: int, low: int, high: int, config: RankingConfig) -> float:
    """1 − amp·(m − m_min)/(m_max − m_min) over the candidates; a no-op when m_max ≤ 1 or all tie."""
    if not config.saturation or high <= 1 or high == low:
        return 1.0
    return 1.0 - config.saturation_amp * (count - low) / (high - low)


def graph_factor(hops: Optional[int], config: RankingConfig) -> float:
    if not config.graph_distance or hops is None:
        return 1.0
    return 1.0 + config.graph_bonus * 2.0 ** (-hops)


def cochange_factor(shared: int, config: RankingConfig) -> float:
    """1 + boost·clamp((s − floor)/(saturation − floor), 0, 1) for s commits shared with a defining file."""
    if not config.cochange or shared <= 0:
        return 1.0
    span = config.cochange_saturation - config.cochange_floor
    return 1.0 + config.cochange_boost * min(1.0, max(0.0, (shared - config.cochange_floor) / span))


def size_factor(lines: int, average: float, path_class: str, config: RankingConfig) -> float:
    if not config.size_prior or path_class != "code" or average <= 0:
        return 1.0
    return 1.0 + config.size_amp * math.tanh(config.size_k * (lines / average - 1.0))


def graph_hops(sources: set[str], edges: Mapping[str, set[str]], limit: int = 4) -> dict[str, int]:
    """Undirected BFS hop counts from the defining files over the import graph (capped at `limit`)."""
    hops = {source: 0 for source in sources}
    frontier = sorted(sources)
    for depth in range(1, limit + 1):
        following = []
        for node in frontier:
            for neighbour in sorted(edges.get(node, ())):
                if neighbour not in hops:
                    hops[neighbour] = depth
                    following.append(neighbour)
        frontier = following
    return hops
