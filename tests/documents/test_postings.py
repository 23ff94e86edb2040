"""Postings construction and encoding, and the segment file format, without a store."""

from __future__ import annotations

import json

import numpy as np

from cruxsql.documents.postings import QueryPostings, index_segment, postings_rows
from cruxsql.documents.segments import ChunkRecord, encode_segment, read_record, read_segment, write_segment


def test_index_segment_lengths_tenants_and_sorted_postings():
    index = index_segment(["Drift drift a cloud", "cloud nodes", "x y z"], ["t1", "t2", "t1"])
    assert index.doc_lengths.tolist() == [3, 2, 0]
    assert index.tenants == ("t1", "t2") and index.doc_tenants.tolist() == [0, 1, 0]
    assert index.terms == ["cloud", "drift", "nod"]          # "nodes": -es with base "nod"
    assert [(ids.tolist(), tfs.tolist()) for ids, tfs in map(index.postings, index.terms)] == [
        ([0, 1], [1, 1]), ([0], [2]), ([1], [1])]
    assert index.postings("absent")[0].tolist() == []
    rows = list(postings_rows(7, index))
    assert rows[0] == ("cloud", 7, 2, np.array([0, 1], "<u4").tobytes(), np.array([1, 1], "<u2").tobytes())


def test_term_frequencies_above_u16_use_u32_for_that_term_only():
    index = index_segment(["ab " * 70_000 + "cd", "cd"], ["t", "t"])
    rows = {row[0]: row for row in postings_rows(1, index)}
    assert rows["ab"][4] == np.array([70_000], "<u4").tobytes()
    assert rows["cd"][4] == np.array([1, 1], "<u2").tobytes()
    merged = QueryPostings.from_rows([("ab", 0, 1, rows["ab"][3], rows["ab"][4]),
                                      ("ab", 1, 1, rows["ab"][3], np.array([3], "<u2").tobytes()),
                                      ("cd", 0, 2, rows["cd"][3], rows["cd"][4])])
    assert merged.terms == ["ab", "cd"] and merged.term_bounds.tolist() == [0, 2, 4]
    assert merged.tfs.tolist() == [70_000, 3, 1, 1] and merged.row_segments.tolist() == [0, 1, 0]


def test_segment_file_round_trip_and_offsets(tmp_path):
    records = [ChunkRecord("t", "c", "doc", f"k{i}", f"text {i} é\nline", "2026-01-01T00:00:00+00:00")
               for i in range(3)]
    sealed = write_segment(tmp_path, 5, "2026-01-01T00:00:00+00:00", records)
    assert sealed.info.file_name.startswith("seg-00000000000000000005-")
    assert read_segment(tmp_path, sealed.info).records == records
    assert read_record(tmp_path, sealed.info.file_name, sealed.offsets[2]) == records[2]
    data, offsets = encode_segment(5, sealed.info.segment_id, "2026-01-01T00:00:00+00:00", records)
    assert data == (tmp_path / sealed.info.file_name).read_bytes() and offsets == sealed.offsets
    assert json.loads(data.split(b"\n")[0]) == {"format": "cruxsql-segment-v1", "segment_seq": 5,
                                                "segment_id": sealed.info.segment_id,
                                                "sealed_at": "2026-01-01T00:00:00+00:00", "chunk_count": 3}
