-- One row per request the gateway answered (or refused), one per upstream
-- attempt, and one per health or breaker event. Times are Unix milliseconds.
-- Rows are keyed by their natural keys (WITHOUT ROWID), so a request costs
-- one b-tree insert per table plus its indexes.

CREATE TABLE requests (
    id              TEXT PRIMARY KEY,
    correlation_id  TEXT NOT NULL,
    started_at      INTEGER NOT NULL,
    finished_at     INTEGER NOT NULL,
    user_agent      TEXT,
    endpoint        TEXT NOT NULL,
    model           TEXT,
    streamed        INTEGER NOT NULL,
    outcome         TEXT NOT NULL,
    status          INTEGER,
    provider        TEXT,
    provider_model  TEXT,
    attempts        INTEGER NOT NULL,
    fallback        INTEGER NOT NULL,
    duration_ms     REAL NOT NULL,
    ttft_ms         REAL,
    input_tokens    INTEGER,
    output_tokens   INTEGER,
    cached_tokens   INTEGER,
    cost_usd        REAL,
    error_code      TEXT,
    error           TEXT,
    request_body    TEXT,
    response_body   TEXT
) WITHOUT ROWID;
-- Few indexes on purpose: every index is another page written per request.
CREATE INDEX requests_by_time ON requests (started_at DESC, id DESC);
CREATE INDEX requests_by_correlation ON requests (correlation_id);

CREATE TABLE attempts (
    request_id      TEXT NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    provider        TEXT NOT NULL,
    key_label       TEXT,
    model           TEXT NOT NULL,
    reason          TEXT NOT NULL,
    fallback_from   TEXT,
    started_at      INTEGER NOT NULL,
    offset_ms       REAL NOT NULL,
    timeout_ms      REAL,
    backoff_ms      REAL NOT NULL,
    duration_ms     REAL,
    ttfb_ms         REAL,
    ttft_ms         REAL,
    status          INTEGER,
    outcome         TEXT NOT NULL,
    retry_after_ms  REAL,
    breaker_state   TEXT,
    error           TEXT,
    input_tokens    INTEGER,
    output_tokens   INTEGER,
    cached_tokens   INTEGER,
    PRIMARY KEY (request_id, seq)
) WITHOUT ROWID;

CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    provider    TEXT,
    detail      TEXT NOT NULL,
    request_id  TEXT
);
CREATE INDEX events_by_time ON events (at);
