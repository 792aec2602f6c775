-- The derived tables computed again from the rows (`switchyard history
-- rebuild`), under one instance key of their own: the PostgreSQL form of
-- history/rebuild.sql.
DELETE FROM rollups;
DELETE FROM request_facets;
DELETE FROM facet_days;
DELETE FROM clients;
DELETE FROM member_days;

INSERT INTO rollups (instance, span, start, provider, model, outcome, requests, fallbacks, input_tokens,
                     output_tokens, cached_tokens, cost_usd, priced, saved_usd)
SELECT 'rebuild', s.span, r.started_at - r.started_at % s.span, COALESCE(r.provider, ''),
       COALESCE(r.provider_model, r.model, ''), r.outcome, COUNT(*), SUM(r.fallback::int),
       COALESCE(SUM(r.input_tokens), 0), COALESCE(SUM(r.output_tokens), 0), COALESCE(SUM(r.cached_tokens), 0),
       COALESCE(SUM(r.cost_usd), 0), COUNT(r.cost_usd), COALESCE(SUM(r.saved_usd), 0)
FROM requests r, (VALUES (60000::int8), (3600000::int8), (86400000::int8)) AS s (span)
GROUP BY 1, 2, 3, 4, 5, 6;

INSERT INTO request_facets (facet, value, started_at, id)
SELECT 1, provider, started_at, id FROM requests WHERE provider IS NOT NULL
UNION ALL SELECT 1, a.provider, r.started_at, r.id FROM attempts a
    JOIN requests r ON r.id = a.request_id AND r.started_at = a.request_started_at
UNION ALL SELECT 2, model, started_at, id FROM requests WHERE model IS NOT NULL
UNION ALL SELECT 2, provider_model, started_at, id FROM requests WHERE provider_model IS NOT NULL
UNION ALL SELECT 3, outcome, started_at, id FROM requests WHERE outcome <> 'ok'
UNION ALL SELECT 4, '', started_at, id FROM requests WHERE outcome <> 'ok'
UNION ALL SELECT 5, '', started_at, id FROM requests WHERE fallback
UNION ALL SELECT 6, cache, started_at, id FROM requests WHERE cache IS NOT NULL
ON CONFLICT DO NOTHING;

INSERT INTO facet_days (facet, value, day)
SELECT DISTINCT facet, value, started_at / 86400000 FROM request_facets
UNION SELECT 0, correlation_id, started_at / 86400000 FROM requests
    WHERE correlation_id <> id OR id !~ '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$';

INSERT INTO clients (instance, user_agent, requests, last_at, last_id, last_model, last_outcome)
SELECT DISTINCT ON (user_agent) 'rebuild', user_agent, COUNT(*) OVER (PARTITION BY user_agent), started_at, id,
       model, outcome
FROM requests WHERE user_agent IS NOT NULL AND user_agent <> ''
ORDER BY user_agent, started_at DESC, id DESC;

INSERT INTO member_days (instance, member, day, requests, cost_usd, input_tokens, output_tokens)
SELECT 'rebuild', member, started_at / 86400000, COUNT(*), COALESCE(SUM(cost_usd), 0),
       COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0)
FROM requests WHERE member IS NOT NULL GROUP BY 2, 3;
