-- The formats of an attempt translated for its provider (`messages>chat`);
-- null when the provider was sent the client's own format.
ALTER TABLE attempts ADD COLUMN translated TEXT;
