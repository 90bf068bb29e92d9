-- webhook_replays: the audit trail of `borda dlq replay`: who replayed
-- which event, why, when, whether --force was given and what happened.

-- +goose Up
CREATE TABLE IF NOT EXISTS webhook_replays (
    id          bigserial   PRIMARY KEY,
    event_id    text        NOT NULL,
    source      text        NOT NULL DEFAULT '',
    operator    text        NOT NULL,
    reason      text        NOT NULL,
    forced      boolean     NOT NULL DEFAULT false,
    replayed_at timestamptz NOT NULL DEFAULT now(),
    outcome     text        NOT NULL,
    error       text        NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS webhook_replays_event_id_idx ON webhook_replays (event_id);
CREATE INDEX IF NOT EXISTS webhook_replays_replayed_at_idx ON webhook_replays (replayed_at);

-- +goose Down
DROP TABLE IF EXISTS webhook_replays;
