-- The derived tables filled from the rows, as `switchyard history rebuild`
-- runs it after emptying both (history/derived.rs): the statements that
-- ended migration 0004, with the columns and facet migration 0006 added.
-- A copy, not a reference: 0004 cannot change once applied, and its
-- `INSERT INTO rollups SELECT` names no columns, so it no longer fits the
-- table. The rebuild test checks this against the rows.
INSERT INTO rollups
SELECT s.span, r.started_at - r.started_at % s.span, COALESCE(r.provider, ''),
       COALESCE(r.provider_model, r.model, ''), r.outcome, COUNT(*), SUM(r.fallback),
       COALESCE(SUM(r.input_tokens), 0), COALESCE(SUM(r.output_tokens), 0), COALESCE(SUM(r.cached_tokens), 0),
       TOTAL(r.cost_usd), COUNT(r.cost_usd), TOTAL(r.saved_usd)
FROM requests r, (SELECT 60000 AS span UNION ALL SELECT 3600000 UNION ALL SELECT 86400000) s
GROUP BY 1, 2, 3, 4, 5;

INSERT OR IGNORE INTO request_facets (facet, value, started_at, id)
SELECT 1, provider, started_at, id FROM requests WHERE provider IS NOT NULL
UNION ALL SELECT 1, a.provider, r.started_at, r.id FROM attempts a JOIN requests r ON r.id = a.request_id
UNION ALL SELECT 2, model, started_at, id FROM requests WHERE model IS NOT NULL
UNION ALL SELECT 2, provider_model, started_at, id FROM requests WHERE provider_model IS NOT NULL
UNION ALL SELECT 3, outcome, started_at, id FROM requests WHERE outcome <> 'ok'
UNION ALL SELECT 4, '', started_at, id FROM requests WHERE outcome <> 'ok'
UNION ALL SELECT 5, '', started_at, id FROM requests WHERE fallback = 1
UNION ALL SELECT 6, cache, started_at, id FROM requests WHERE cache IS NOT NULL;

-- The clients of migration 0007, as it filled them.
INSERT INTO clients (user_agent, requests, last_at, last_id, last_model, last_outcome)
SELECT user_agent, COUNT(*), MAX(started_at), id, model, outcome
FROM requests WHERE user_agent IS NOT NULL AND user_agent <> ''
GROUP BY user_agent;
