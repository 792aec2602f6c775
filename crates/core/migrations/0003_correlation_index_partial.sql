-- Most requests carry no caller's id, so their correlation id is their own
-- id, which the primary key already finds. Indexing only the others spares
-- most requests one b-tree insert; a correlation lookup reads this index
-- for requests that took a caller's id and the primary key for the one
-- whose own id it is.
DROP INDEX requests_by_correlation;
CREATE INDEX requests_by_correlation ON requests (correlation_id) WHERE correlation_id <> id;
