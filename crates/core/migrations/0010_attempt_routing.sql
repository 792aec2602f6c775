-- Why the route's strategy put an attempt's provider where it was: the
-- strategy and the figures it weighed (latency, requests in flight, price,
-- weight), as compact JSON; null for an attempt in chain order.
ALTER TABLE attempts ADD COLUMN routing TEXT;
