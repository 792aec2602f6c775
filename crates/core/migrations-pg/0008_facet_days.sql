-- Which UTC days (Unix ms / 86,400,000) hold requests with each facet
-- entry, and each correlation id (facet 0) given to a request other than
-- its own, or a request's own when its id is not a UUIDv7 (the gateway's
-- ids are; one names its day by itself). A list filtered by one reads these few rows first and asks
-- only the partitions of those days: a query is planned per partition, and
-- a rare filter over a year of days planned every one (100-150 ms at
-- 10,000 requests, where the rows themselves take a millisecond). Kept by
-- the writer in the batch's transaction (a few rows a batch), dropped with
-- its day by retention, computed again by `history rebuild`.
CREATE TABLE facet_days (
    facet   BIGINT NOT NULL,
    value   TEXT NOT NULL,
    day     BIGINT NOT NULL,
    PRIMARY KEY (facet, value, day)
);

INSERT INTO facet_days (facet, value, day)
SELECT DISTINCT facet, value, started_at / 86400000 FROM request_facets;

INSERT INTO facet_days (facet, value, day)
SELECT DISTINCT 0, correlation_id, started_at / 86400000 FROM requests
WHERE correlation_id <> id OR id !~ '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$'
ON CONFLICT DO NOTHING;
