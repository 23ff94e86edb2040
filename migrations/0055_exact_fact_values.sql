-- Crux's value ranges (issue 49): what a typed column cannot hold, kept exactly beside it.
-- `tokens` is a usize in Crux: above 2^63-1 the INTEGER column saturates and `tokens_exact` holds the
-- decimal text. A negative zero confidence reads back from a REAL column as 0.0: `confidence_exact`
-- holds "-0.0". Both NULL otherwise (docs/sql.md).
ALTER TABLE facts ADD COLUMN tokens_exact TEXT;
ALTER TABLE facts ADD COLUMN confidence_exact TEXT;
-- Lines this version reads and earlier ones recorded as corrupt (times outside 1677-2262, tokens above
-- 2^63-1), and zero confidences that may have been -0.0: the view is rebuilt from the journal at the
-- next open (no checkpoint: a full replay), so they come back exactly.
DELETE FROM journal_checkpoint
 WHERE EXISTS (SELECT 1 FROM journal_corrupt_lines) OR EXISTS (SELECT 1 FROM facts WHERE confidence = 0);
