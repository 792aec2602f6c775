-- Input tokens a request (and each attempt) wrote to the provider's prompt
-- cache, null when the provider did not say; and whether a request's newest
-- message was the user's own input (a turn) or an agent's follow-up after
-- tool calls, null when not known. Added to the partitioned parents, so to
-- every day.
ALTER TABLE requests ADD COLUMN cache_write_tokens BIGINT;
ALTER TABLE requests ADD COLUMN turn BOOLEAN;
ALTER TABLE attempts ADD COLUMN cache_write_tokens BIGINT;
