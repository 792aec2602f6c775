-- What a translated attempt left out: the drop table's rows with their
-- reasons, then what the client sent that the translator does not know,
-- as a JSON array of strings; null when nothing was.
ALTER TABLE attempts ADD COLUMN dropped TEXT;
