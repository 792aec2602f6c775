-- The conversation a request is part of (a coding agent's session, from
-- the client's own id or a digest of how the conversation opened); null
-- for a request refused before its body was read. Indexed with the time,
-- so that a session's requests are read by its key within a window.
ALTER TABLE requests ADD COLUMN session TEXT;
CREATE INDEX requests_session ON requests (session, started_at) WHERE session IS NOT NULL;
