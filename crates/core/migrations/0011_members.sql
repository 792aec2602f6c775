-- Team members: who may use the gateway with a key of their own. Only a
-- SHA-256 of each key is kept (keys are 32 random bytes: nothing to guess).
CREATE TABLE members (
    name TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER,
    budget_usd REAL,
    budget_period TEXT,
    rpm INTEGER,
    tpm INTEGER,
    models TEXT NOT NULL DEFAULT ''
);
-- The member a request was made with; null for the owner (the local access
-- token) or a gateway without members.
ALTER TABLE requests ADD COLUMN member TEXT;
CREATE INDEX requests_member ON requests (member, started_at) WHERE member IS NOT NULL;
