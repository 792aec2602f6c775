-- Why the route's strategy put an attempt's provider where it was: the
-- strategy and the figures it weighed (latency, requests in flight, price,
-- weight), as a format byte and postcard (history/record.rs,
-- AttemptRouting::column); null for an attempt in chain order.
ALTER TABLE attempts ADD COLUMN routing BLOB;
