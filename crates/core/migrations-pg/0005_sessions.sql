-- The conversation a request is part of; null for a request refused before
-- its body was read. Added to the partitioned parent, so to every day.
ALTER TABLE requests ADD COLUMN session TEXT;
CREATE INDEX requests_session ON requests (session, started_at) WHERE session IS NOT NULL;
