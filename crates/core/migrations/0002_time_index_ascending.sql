-- New requests have the latest start time. In a descending index that is
-- the far left of the b-tree, where every full page is split the slow way;
-- ascending, they append at the right edge. Newest-first reads walk the
-- same index backwards.
DROP INDEX requests_by_time;
CREATE INDEX requests_by_time ON requests (started_at, id);
