-- Input tokens a request (and each attempt) wrote to the provider's prompt
-- cache (Anthropic's `cache_creation_input_tokens`), null when the provider
-- did not say; and whether a request's newest message was the user's own
-- input (1, a turn of the conversation) or an agent's follow-up after tool
-- calls (0), null when not known (rows from before, bodies not read).
ALTER TABLE requests ADD COLUMN cache_write_tokens INTEGER;
ALTER TABLE requests ADD COLUMN turn INTEGER;
ALTER TABLE attempts ADD COLUMN cache_write_tokens INTEGER;
