-- +goose Up
-- The rate limiter's distribution counters (docs/rollout.md): per rule and
-- threshold, the subject-windows that went past it; dimension
-- "{rule}:{threshold}". Retention (telemetry.retention_days) expires them
-- with the other kinds.
ALTER TABLE gateway_metrics DROP CONSTRAINT gateway_metrics_kind_check;
ALTER TABLE gateway_metrics ADD CONSTRAINT gateway_metrics_kind_check
    CHECK (kind IN ('endpoint', 'escola', 'blocked', 'would_block', 'status', 'distribution'));
COMMENT ON COLUMN gateway_metrics.dimension IS 'endpoint/blocked/would_block: {route}:{path template}; escola: escola_id; status: HTTP status code; distribution: {rule}:{threshold}';

-- +goose Down
DELETE FROM gateway_metrics WHERE kind = 'distribution';
ALTER TABLE gateway_metrics DROP CONSTRAINT gateway_metrics_kind_check;
ALTER TABLE gateway_metrics ADD CONSTRAINT gateway_metrics_kind_check
    CHECK (kind IN ('endpoint', 'escola', 'blocked', 'would_block', 'status'));
COMMENT ON COLUMN gateway_metrics.dimension IS 'endpoint/blocked/would_block: {route}:{path template}; escola: escola_id; status: HTTP status code';
