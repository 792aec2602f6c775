-- Each member's requests, tokens and spend a UTC day (Unix ms / 86,400,000),
-- keyed by the writer that added them, as rollups are. A member's spend
-- since a time (/admin/spend, the members' budgets) sums these for whole
-- days and reads the requests of the first, partial day alone; summing the
-- requests themselves planned a partition a day (a year: ~100 ms, where
-- the answer has a handful of rows). Kept by the writer in the batch's
-- transaction, dropped with its day by retention, computed again by
-- `history rebuild`.
CREATE TABLE member_days (
    instance        TEXT NOT NULL,
    member          TEXT NOT NULL,
    day             BIGINT NOT NULL,
    requests        BIGINT NOT NULL,
    cost_usd        DOUBLE PRECISION NOT NULL,
    input_tokens    BIGINT NOT NULL,
    output_tokens   BIGINT NOT NULL,
    PRIMARY KEY (instance, member, day)
);
CREATE INDEX member_days_by_day ON member_days (day);

INSERT INTO member_days (instance, member, day, requests, cost_usd, input_tokens, output_tokens)
SELECT 'migration', member, started_at / 86400000, COUNT(*), COALESCE(SUM(cost_usd), 0),
       COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0)
FROM requests WHERE member IS NOT NULL GROUP BY 2, 3;
