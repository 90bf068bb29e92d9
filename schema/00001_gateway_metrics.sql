-- +goose Up
-- Per-minute telemetry counters folded from Redis by `borda aggregate`
-- (design.md §5). One row per environment, kind, dimension and UTC minute;
-- the aggregation upserts, so a re-run or an overlap writes the same row.
CREATE TABLE gateway_metrics (
    environment text        NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('endpoint', 'escola', 'blocked', 'would_block', 'status')),
    dimension   text        NOT NULL,
    minute      timestamptz NOT NULL,
    count       bigint      NOT NULL CHECK (count >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (environment, kind, dimension, minute)
);

-- Time-range reports ("top schools last week") filter by kind and minute.
CREATE INDEX gateway_metrics_kind_minute_idx ON gateway_metrics (environment, kind, minute);

COMMENT ON TABLE gateway_metrics IS 'Borda per-minute request counters (design.md §5), upserted from Redis {prefix}m:* by borda aggregate';
COMMENT ON COLUMN gateway_metrics.dimension IS 'endpoint/blocked/would_block: {route}:{path template}; escola: escola_id; status: HTTP status code';

-- +goose Down
DROP TABLE gateway_metrics;
