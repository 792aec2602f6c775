-- clients: each user agent on record, with its request count and its
-- newest request, kept by the writer in the same transaction as the rows
-- (and taken away by retention) like the rollups, so that the dashboard's
-- Tools view reads a row per client instead of grouping every request.
-- An empty or missing user agent is no client. `switchyard history
-- rebuild` fills it again with the statement in history/rebuild.sql.
CREATE TABLE clients (
    user_agent      TEXT PRIMARY KEY,
    requests        INTEGER NOT NULL,
    last_at         INTEGER NOT NULL,
    last_id         TEXT NOT NULL,
    last_model      TEXT,
    last_outcome    TEXT NOT NULL
) WITHOUT ROWID;

-- SQLite takes the bare columns of a MAX() aggregate from the row holding the maximum.
INSERT INTO clients (user_agent, requests, last_at, last_id, last_model, last_outcome)
SELECT user_agent, COUNT(*), MAX(started_at), id, model, outcome
FROM requests WHERE user_agent IS NOT NULL AND user_agent <> ''
GROUP BY user_agent;
