-- What the response cache did for each request: `hit`, `stale`, `miss` or
-- `bypass`, null when it was not consulted; and, for an answer from the
-- cache, what it would have cost from the provider (`saved_usd`), which the
-- rollups sum. Facet 6 lists requests by cache status, for `cache=`
-- filters. The rows on record before this have no status and saved
-- nothing, which is what the defaults say: there is nothing to fill.
-- `switchyard history rebuild` reads history/rebuild.sql, the fill of
-- migration 0004 brought up to these columns.
ALTER TABLE requests ADD COLUMN cache TEXT;
ALTER TABLE requests ADD COLUMN saved_usd REAL;
ALTER TABLE rollups ADD COLUMN saved_usd REAL NOT NULL DEFAULT 0;
