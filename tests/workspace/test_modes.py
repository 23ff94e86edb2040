"""The typed read-mode enum and the mode-default table with its no-lossy-override guard."""

import pytest

from cruxsql.errors import InvalidInput
from cruxsql.workspace.modes import FULL, ModeKind, ReadMode, resolve_auto, static_default
from cruxsql.workspace.governor import call_signature, nudge


@pytest.mark.parametrize("text", ["full", "lines:1-1", "lines:72-92", "signatures", "map", "sections", "auto"])
def test_modes_round_trip_byte_for_byte(text):
    assert str(ReadMode.parse(text)) == text
    assert ReadMode.parse(str(ReadMode.parse(text))) == ReadMode.parse(text)


@pytest.mark.parametrize("text", ["lines:72:92", "lines:", "lines:0-3", "lines:-3", "Full", "signature", ""])
def test_malformed_modes_never_fall_back_to_full(text):
    with pytest.raises(InvalidInput):
        ReadMode.parse(text)


def test_lossy_modes_are_the_summaries():
    assert [k.value for k in ModeKind if k is not ModeKind.AUTO and ReadMode(k).lossy] == ["sections", "signatures", "map"]


@pytest.mark.parametrize("path_class, lang, tokens", [
    ("docs", "markdown", 50_000), ("config", "toml", 9_000), ("docs", "text", 3_000), ("code", "json", 20_000)])
def test_docs_and_config_are_never_compressed_by_default(path_class, lang, tokens):
    assert static_default(path_class, lang, tokens) == FULL
    for lossier in ("signatures", "map", "sections", "lines:1-5"):
        assert resolve_auto(path_class, lang, tokens, ReadMode.parse(lossier)) == FULL


def test_auto_may_pick_a_more_faithful_mode_but_never_a_lossier_one():
    assert static_default("code", "python", 5_000) == ReadMode(ModeKind.SIGNATURES)
    assert static_default("code", "python", 400) == FULL
    assert resolve_auto("code", "python", 5_000, ReadMode.parse("lines:1-40")) == ReadMode(ModeKind.LINES, 1, 40)
    assert resolve_auto("code", "python", 5_000, ReadMode.parse("map")) == ReadMode(ModeKind.SIGNATURES)


def test_governor_counts_identical_signatures_inside_the_window():
    a, b = call_signature("ctx_read", {"path": "x.py"}), call_signature("ctx_read", {"path": "y.py"})
    assert call_signature("ctx_read", {"path": "x.py"}) == a != b
    assert nudge("ctx_read", a, [a]) is None
    assert nudge("ctx_read", a, [a, a]).startswith("nudge: same ctx_read call 3x in the last 3 calls")
    assert nudge("ctx_read", a, [a, b, b, b, b, b, b, a]) is None     # the first a fell out of the window
    assert nudge("ctx_read", a, [a, b, b, b, b, b, a]) is not None
