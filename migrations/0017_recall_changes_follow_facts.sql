-- The known_at timeline's rows of a fact go with it (issue 15). A fact hard-removed from the view (a
-- latest-only chain, `replace_latest`) used to leave its rows behind, read again if a later line stored
-- the same fact id anew, and which of them existed depended on where replay's transactions ended (a
-- rebuild extends the timeline once, a store after each write). Now rows exist only for a fact in the
-- view and for lines from its own store line on: this trigger drops them with the fact, and
-- Timeline.catch_up records no change of a fact that is gone or was stored again after the change.

CREATE TRIGGER recall_changes_follow_delete AFTER DELETE ON facts BEGIN
    DELETE FROM recall_changes WHERE fact_id = old.fact_id;
END;

DELETE FROM recall_changes WHERE NOT EXISTS (
    SELECT 1 FROM facts f WHERE f.fact_id = recall_changes.fact_id AND f.line_no <= recall_changes.line_no);
