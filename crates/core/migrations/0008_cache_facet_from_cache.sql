-- Facet 6 (the cache status) now lists only the answers the cache gave,
-- `hit` and `stale`. A `miss` or a `bypass` is answered by the chain, and
-- on a route with the cache on that is most requests: like an `ok`
-- outcome, which has no facet entry, their filters walk the time index
-- and check the row's `cache` column, and the writer spends no B-tree
-- entry per request on them (about a seventh of what a cache miss cost).
-- Retention removes facet entries by the same rule it writes them, so the
-- entries written before this would never be removed: they go now.
DELETE FROM request_facets WHERE facet = 6 AND value NOT IN ('hit', 'stale');
