-- Two tables derived from the rows, kept by the writer in the same
-- transaction as the rows they come from, so that reads never aggregate or
-- filter the whole history.
--
-- rollups: sums per time span, provider, model and outcome, at three spans
-- (a minute, an hour and a day, in ms), so that a spend chart reads one row
-- per bucket and key whatever the bucket. `start` is a multiple of `span`
-- (UTC). `provider` is '' when none answered; `model` is the provider's
-- model, else the model asked for, else ''. `cost_usd` sums the known costs
-- and `priced` counts them: a key with no priced request has no cost.
CREATE TABLE rollups (
    span            INTEGER NOT NULL,
    start           INTEGER NOT NULL,
    provider        TEXT NOT NULL,
    model           TEXT NOT NULL,
    outcome         TEXT NOT NULL,
    requests        INTEGER NOT NULL,
    fallbacks       INTEGER NOT NULL,
    input_tokens    INTEGER NOT NULL,
    output_tokens   INTEGER NOT NULL,
    cached_tokens   INTEGER NOT NULL,
    cost_usd        REAL NOT NULL,
    priced          INTEGER NOT NULL,
    PRIMARY KEY (span, start, provider, model, outcome)
) WITHOUT ROWID;

-- request_facets: for each filter that selects few rows, the requests it
-- selects, newest last, so that a filtered page reads as many entries as it
-- shows. Facets: 1 a provider that answered or was tried, 2 a model asked
-- for or used, 3 an outcome other than ok, 4 failed (any outcome but ok),
-- 5 fell back. An ok request without a fallback has only its provider and
-- model entries.
CREATE TABLE request_facets (
    facet           INTEGER NOT NULL,
    value           TEXT NOT NULL,
    started_at      INTEGER NOT NULL,
    id              TEXT NOT NULL,
    PRIMARY KEY (facet, value, started_at, id)
) WITHOUT ROWID;

-- Both filled from the rows already on record. `switchyard history rebuild`
-- empties both and runs the statements after the next line, read from this
-- file (history/derived.rs), so the two cannot drift apart.
-- rebuild:
INSERT INTO rollups
SELECT s.span, r.started_at - r.started_at % s.span, COALESCE(r.provider, ''),
       COALESCE(r.provider_model, r.model, ''), r.outcome, COUNT(*), SUM(r.fallback),
       COALESCE(SUM(r.input_tokens), 0), COALESCE(SUM(r.output_tokens), 0), COALESCE(SUM(r.cached_tokens), 0),
       TOTAL(r.cost_usd), COUNT(r.cost_usd)
FROM requests r, (SELECT 60000 AS span UNION ALL SELECT 3600000 UNION ALL SELECT 86400000) s
GROUP BY 1, 2, 3, 4, 5;

INSERT OR IGNORE INTO request_facets (facet, value, started_at, id)
SELECT 1, provider, started_at, id FROM requests WHERE provider IS NOT NULL
UNION ALL SELECT 1, a.provider, r.started_at, r.id FROM attempts a JOIN requests r ON r.id = a.request_id
UNION ALL SELECT 2, model, started_at, id FROM requests WHERE model IS NOT NULL
UNION ALL SELECT 2, provider_model, started_at, id FROM requests WHERE provider_model IS NOT NULL
UNION ALL SELECT 3, outcome, started_at, id FROM requests WHERE outcome <> 'ok'
UNION ALL SELECT 4, '', started_at, id FROM requests WHERE outcome <> 'ok'
UNION ALL SELECT 5, '', started_at, id FROM requests WHERE fallback = 1;
