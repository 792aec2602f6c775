-- The history on PostgreSQL, shared by every gateway of a team: the same
-- rows and derived tables as the SQLite file (crates/core/migrations),
-- shaped for many writers and for retention by whole days.
--
-- requests, attempts and request_facets are partitioned by the request's
-- start (Unix ms), one partition per UTC day, created by the writer before
-- it writes a day's first rows (history/pg/write.rs). Age retention drops
-- whole partitions instead of deleting rows. A key on a partitioned table
-- must include the partition column, so a request is keyed by (id,
-- started_at): a record replayed from a spool has both the same, and
-- `ON CONFLICT DO NOTHING` keeps it once.

CREATE TABLE requests (
    id              TEXT NOT NULL,
    correlation_id  TEXT NOT NULL,
    started_at      BIGINT NOT NULL,
    finished_at     BIGINT NOT NULL,
    user_agent      TEXT,
    endpoint        TEXT NOT NULL,
    model           TEXT,
    streamed        BOOLEAN NOT NULL,
    outcome         TEXT NOT NULL,
    status          BIGINT,
    provider        TEXT,
    provider_model  TEXT,
    attempts        BIGINT NOT NULL,
    fallback        BOOLEAN NOT NULL,
    duration_ms     DOUBLE PRECISION NOT NULL,
    ttft_ms         DOUBLE PRECISION,
    input_tokens    BIGINT,
    output_tokens   BIGINT,
    cached_tokens   BIGINT,
    cost_usd        DOUBLE PRECISION,
    error_code      TEXT,
    error           TEXT,
    request_body    TEXT,
    response_body   TEXT,
    cache           TEXT,
    saved_usd       DOUBLE PRECISION,
    PRIMARY KEY (id, started_at)
) PARTITION BY RANGE (started_at);
CREATE INDEX requests_by_time ON requests (started_at, id);
CREATE INDEX requests_by_correlation ON requests (correlation_id) WHERE correlation_id <> id;

-- request_started_at: the partition key, so a request's attempts go with it.
CREATE TABLE attempts (
    request_id          TEXT NOT NULL,
    seq                 BIGINT NOT NULL,
    request_started_at  BIGINT NOT NULL,
    provider            TEXT NOT NULL,
    key_label           TEXT,
    model               TEXT NOT NULL,
    reason              TEXT NOT NULL,
    fallback_from       TEXT,
    started_at          BIGINT NOT NULL,
    offset_ms           DOUBLE PRECISION NOT NULL,
    timeout_ms          DOUBLE PRECISION,
    backoff_ms          DOUBLE PRECISION NOT NULL,
    duration_ms         DOUBLE PRECISION,
    ttfb_ms             DOUBLE PRECISION,
    ttft_ms             DOUBLE PRECISION,
    status              BIGINT,
    outcome             TEXT NOT NULL,
    retry_after_ms      DOUBLE PRECISION,
    breaker_state       TEXT,
    error               TEXT,
    input_tokens        BIGINT,
    output_tokens       BIGINT,
    cached_tokens       BIGINT,
    translated          TEXT,
    dropped             TEXT,
    PRIMARY KEY (request_id, seq, request_started_at)
) PARTITION BY RANGE (request_started_at);

-- The same facets as SQLite's (history/derived.rs: Facet).
CREATE TABLE request_facets (
    facet       BIGINT NOT NULL,
    value       TEXT NOT NULL,
    started_at  BIGINT NOT NULL,
    id          TEXT NOT NULL,
    PRIMARY KEY (facet, value, started_at, id)
) PARTITION BY RANGE (started_at);

CREATE TABLE events (
    id          BIGSERIAL PRIMARY KEY,
    at          BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    provider    TEXT,
    detail      TEXT NOT NULL,
    request_id  TEXT
);
CREATE INDEX events_by_time ON events (at);

-- rollups and clients are keyed by the instance that wrote them as well:
-- each gateway adds only to its own rows, so no two gateways ever update
-- one row (no lock waits between them, no deadlocks), and readers sum over
-- instances. Retention subtracts under an instance of its own.
CREATE TABLE rollups (
    instance        TEXT NOT NULL,
    span            BIGINT NOT NULL,
    start           BIGINT NOT NULL,
    provider        TEXT NOT NULL,
    model           TEXT NOT NULL,
    outcome         TEXT NOT NULL,
    requests        BIGINT NOT NULL,
    fallbacks       BIGINT NOT NULL,
    input_tokens    BIGINT NOT NULL,
    output_tokens   BIGINT NOT NULL,
    cached_tokens   BIGINT NOT NULL,
    cost_usd        DOUBLE PRECISION NOT NULL,
    priced          BIGINT NOT NULL,
    saved_usd       DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (instance, span, start, provider, model, outcome)
);
CREATE INDEX rollups_by_time ON rollups (span, start);

CREATE TABLE clients (
    instance        TEXT NOT NULL,
    user_agent      TEXT NOT NULL,
    requests        BIGINT NOT NULL,
    last_at         BIGINT NOT NULL,
    last_id         TEXT NOT NULL,
    last_model      TEXT,
    last_outcome    TEXT NOT NULL,
    PRIMARY KEY (instance, user_agent)
);
