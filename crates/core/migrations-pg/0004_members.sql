-- Team members: who may use the gateway with a key of their own. Only a
-- SHA-256 of each key is kept (keys are 32 random bytes: nothing to guess).
CREATE TABLE members (
    name TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT,
    budget_usd DOUBLE PRECISION,
    budget_period TEXT,
    rpm BIGINT,
    tpm BIGINT,
    models TEXT NOT NULL DEFAULT ''
);
-- The member a request was made with; null for the owner. Added to the
-- partitioned parent, so to every day.
ALTER TABLE requests ADD COLUMN member TEXT;
CREATE INDEX requests_member ON requests (member, started_at) WHERE member IS NOT NULL;
