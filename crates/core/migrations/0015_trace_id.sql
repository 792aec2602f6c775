-- The request's W3C trace id (32 lowercase hex digits), under which its
-- spans were exported; null when tracing is off, and for rows from before.
-- Not indexed: it is shown with its request and matched by the request
-- list's search, which checks it on the rows it walks.
ALTER TABLE requests ADD COLUMN trace_id TEXT;
