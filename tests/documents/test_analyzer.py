"""The BM25 analyzer (corecrux-index tokenizer.rs) and the chunker (local_ingest.rs), against hand-computed values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cruxsql.documents.analyzer import analyze, split_words, stem, surface_words
from cruxsql.documents.chunking import chunk_markdown, chunk_plain_text


def test_worked_examples_of_the_spec():
    assert analyze("Hello, World! This is a test.") == ["hello", "world", "thi", "is", "test"]
    assert analyze("Running policies deployment creation user's don't") == [
        "runn", "polici", "deploy", "creat", "user'", "don't"]
    assert analyze("CI CD pipeline automation deployment") == ["ci", "cd", "pipeline", "automat", "deploy"]


@pytest.mark.parametrize("word, expected", [
    ("bus", "bus"),            # three bytes or fewer: unchanged
    ("policies", "polici"),    # -ies, base >= 2 -> base + i
    ("ties", "tie"),           # -ies base "t" too short; -es base "ti" too short; then the plain -s rule
    ("studied", "studi"),      # -ied -> base + i
    ("classes", "class"),      # -sses -> base + ss
    ("sses", "ss"),            # -sses has no base minimum
    ("kindness", "kind"),      # -ness
    ("payment", "pay"),        # -ment, base >= 3
    ("ment", "ment"),          # -ment with an empty base: no rule applies
    ("running", "runn"),       # -ing, base >= 3
    ("string", "str"),
    ("sing", "sing"),          # -ing base "s" too short, does not end in s
    ("bring", "bring"),        # base "br" too short
    ("nation", "nat"),         # -tion -> base + t
    ("automation", "automat"), # -tion matches before -ation
    ("ation", "ation"),        # -tion base "a" too short, -ation base "" too short
    ("readable", "read"),      # -able
    ("visible", "vis"),        # -ible
    ("helpful", "help"),       # -ful
    ("famous", "fam"),         # -ous
    ("active", "act"),         # -ive
    ("quickly", "quick"),      # -ly
    ("jumped", "jump"),        # -ed
    ("seed", "seed"),          # -ed base "se" too short
    ("faster", "fast"),        # -er
    ("container", "contain"),
    ("boxes", "box"),          # -es
    ("kubernetes", "kubernet"),
    ("cats", "cat"),           # final s, length >= 4
    ("glass", "glass"),        # -ss is kept
    ("this", "thi"),
    ("user's", "user'"),
    ("don't", "don't"),
])
def test_stemmer_rules(word, expected):
    assert stem(word) == expected


def test_stemmer_lengths_are_utf8_bytes():
    assert stem("éés") == "éé"      # 3 characters but 5 bytes: the -s rule applies
    assert stem("ééed") == "éé"     # base "éé" is 4 bytes >= 3
    assert stem("éed") == "éed"     # base "é" is 2 bytes < 3


def test_split_lowercase_and_drop():
    # Underscore and hyphen split; apostrophes stay inside tokens, even at the edges.
    assert analyze("multi-tenant snake_case 'quoted'") == ["multi", "tenant", "snake", "case", "'quoted'"]
    # Single-byte pieces are dropped; a single two-byte character is kept.
    assert analyze("a I x 7 é") == ["é"]
    # ASCII-only lowercasing: the non-ASCII capital stays, the ASCII ones are lowered.
    assert analyze("ÉCOLE Straße") == ["École", "straße"]
    # Unicode alphanumerics: Alphabetic (incl. combining vowel signs) and every N category.
    assert split_words("किताब Ⅻ x²") == ["किताब", "Ⅻ", "x²"]


def test_surface_words_align_with_tokens():
    query = "Quantum drift-detection a I quantum"
    assert surface_words(query) == ["Quantum", "drift", "detection", "quantum"]
    assert len(surface_words(query)) == len(analyze(query))


def test_chunk_short_and_empty():
    assert chunk_plain_text("  \n\t ") == []
    assert chunk_plain_text("  hello world \n") == ["hello world"]
    assert chunk_plain_text("x" * 1800) == ["x" * 1800]


def test_chunk_prefers_a_blank_line_after_the_minimum():
    text = "a" * 1500 + "\n\n" + "b" * 1000
    # cut at 1502 (after the blank line); next start 1502 - 180 = 1322 runs to the end
    assert chunk_plain_text(text) == ["a" * 1500, "a" * 178 + "\n\n" + "b" * 1000]


def test_chunk_ignores_a_blank_line_before_the_minimum():
    text = "a" * 1000 + "\n\n" + "b" * 1500
    chunks = chunk_plain_text(text)
    # no blank line in [1200, 1800]; no whitespace there either: hard cut at 1800
    assert chunks[0] == "a" * 1000 + "\n\n" + "b" * 798
    assert chunks[1] == "b" * (1500 - (1620 - 1002))


def test_chunk_falls_back_to_whitespace():
    text = "abcd " * 400              # 2000 characters, trimmed to 1999
    chunks = chunk_plain_text(text)
    assert chunks[0] == ("abcd " * 360).strip()        # cut at 1800: chars[1799] is a space
    assert chunks[1] == ("abcd " * 76).strip()         # from 1620 to the end
    assert len(chunks) == 2


def test_chunk_hard_cuts_with_overlap_counting_characters_not_bytes():
    assert [len(c) for c in chunk_plain_text("x" * 4000)] == [1800, 1800, 760]
    assert [len(c) for c in chunk_plain_text("é" * 2000)] == [1800, 380]


def test_markdown_sections_at_atx_headings():
    text = "intro\n# A\ntext a\n   ## B\ntext b\n####### seven\n#nospace\n#\tTab\nt\n#\x0bvt\n"
    assert chunk_markdown(text) == ["intro", "# A\ntext a", "## B\ntext b\n####### seven\n#nospace",
                                    "#\tTab\nt\n#\x0bvt"]


def test_markdown_heading_after_blank_lines_does_not_split():
    assert chunk_markdown("\n\n# A\nx\n") == ["# A\nx"]
    assert chunk_markdown("") == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["word", "x", "é", " ", "\n", "\n\n", "# h", "ab'c", "\t"]), max_size=1500))
def test_chunks_are_bounded_trimmed_substrings_spanning_the_text(parts):
    text = "".join(parts)
    chunks = chunk_plain_text(text)
    body = text.strip(" \t\n")
    assert all(0 < len(c) <= 1800 and c == c.strip(" \t\n") and c in body for c in chunks)
    assert (chunks == []) == (body == "")
    if chunks:
        assert body.startswith(chunks[0]) and body.endswith(chunks[-1])


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_tokens_are_normalized_surface_words(text):
    tokens = analyze(text)
    assert len(tokens) == len(surface_words(text))
    assert all(token and " " not in token for token in tokens)
