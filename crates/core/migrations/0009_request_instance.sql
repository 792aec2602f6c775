-- The team instance that served a request (`[team] instance`); null for a
-- gateway alone.
ALTER TABLE requests ADD COLUMN instance TEXT;
