-- whatsapp_instances: the last known connection state of each WhatsApp
-- instance, kept by `borda consume-events` from Evolution's
-- connection.update events. event_time is the event's own date_time; an
-- event older than the stored one never overwrites it (out-of-order
-- delivery), see webhook/instances.

-- +goose Up
CREATE TABLE IF NOT EXISTS whatsapp_instances (
    instance     text        PRIMARY KEY,
    state        text        NOT NULL,
    state_reason integer,
    event_time   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE IF EXISTS whatsapp_instances;
