-- recall's word analyzer stems with Snowball English and an irregular-forms table before Crux's suffix
-- stemmer (cruxsql/recall/word_stems.py): the word postings of 0019 hold the old stems, so the recall
-- index starts over; the next open of the store indexes every fact again.
DELETE FROM recall_terms;
DELETE FROM recall_term_stats;
DELETE FROM recall_index_state;
