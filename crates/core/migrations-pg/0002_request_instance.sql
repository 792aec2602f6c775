-- The team instance that served a request (`[team] instance`); null for a
-- gateway alone. Added to the partitioned parent, so to every day.
ALTER TABLE requests ADD COLUMN instance TEXT;
