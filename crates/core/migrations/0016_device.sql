-- The device a member's joined gateway sent the request from
-- (`x-switchyard-device`); null for any other request, and for rows from
-- before. Not indexed: a device is a filter beside its member's, over the
-- rows that filter walks.
ALTER TABLE requests ADD COLUMN device TEXT;
