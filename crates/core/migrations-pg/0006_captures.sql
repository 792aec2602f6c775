-- What the inspector shows: a captured request's bodies, one
-- zstd-compressed JSON document per request, in a table of its own so the
-- request rows and the list queries never read it. `replay_of`: the
-- request this one re-sent, for a replay.
CREATE TABLE captures (
    request_id TEXT PRIMARY KEY,
    started_at BIGINT NOT NULL,
    replay_of TEXT,
    data BYTEA NOT NULL
);
CREATE INDEX captures_started_at ON captures (started_at);
CREATE INDEX captures_replay_of ON captures (replay_of) WHERE replay_of IS NOT NULL;
