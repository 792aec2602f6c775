-- What the inspector shows: a captured request's bodies (the client's, each
-- attempt's upstream request and response, what the client got), one
-- zstd-compressed JSON document per request. A table of its own, so the
-- request rows and the list queries never read it. `replay_of`: the request
-- this one re-sent, for a replay.
CREATE TABLE captures (
    request_id TEXT PRIMARY KEY,
    started_at INTEGER NOT NULL,
    replay_of TEXT,
    data BLOB NOT NULL
);
CREATE INDEX captures_started_at ON captures (started_at);
CREATE INDEX captures_replay_of ON captures (replay_of) WHERE replay_of IS NOT NULL;
