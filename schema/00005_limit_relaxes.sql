-- limit_relaxes: the audit trail of `borda limits relax` and of the
-- operator page's relax form (package ratelimit/relaxaudit): who raised
-- which rule's limit, by what factor, for how long, why, from where, and
-- whether the store took it. The row is written before the store is.

-- +goose Up
CREATE TABLE IF NOT EXISTS limit_relaxes (
    id           bigserial        PRIMARY KEY,
    environment  text             NOT NULL DEFAULT '',
    rule         text             NOT NULL,
    factor       double precision NOT NULL,
    lasts        interval         NOT NULL,
    operator     text             NOT NULL,
    reason       text             NOT NULL,
    origin       text             NOT NULL,
    requested_at timestamptz      NOT NULL DEFAULT now(),
    ends_at      timestamptz      NOT NULL,
    outcome      text             NOT NULL,
    error        text             NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS limit_relaxes_requested_at_idx ON limit_relaxes (requested_at);
COMMENT ON COLUMN limit_relaxes.origin IS 'cli: borda limits relax; page: the operator page''s relax form';
COMMENT ON COLUMN limit_relaxes.outcome IS 'pending: recorded, store not yet written; applied: in the store until ends_at; failed: not in force, error says why';

-- +goose Down
DROP TABLE IF EXISTS limit_relaxes;
