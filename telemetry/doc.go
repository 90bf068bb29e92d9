// Package telemetry counts traffic per minute off the request path and
// folds the counts into PostgreSQL (docs/telemetry.md).
//
// A Recorder takes one Event per finished request. Record never blocks and
// never does I/O: it puts the event on a bounded queue, or drops and counts
// it (borda_telemetry_dropped_total{reason="queue_full"}). One flusher
// goroutine folds queued events into per-key counts and writes them as ONE
// atomic pipeline of INCRBY + EXPIRE (TTL 2 h on every key) on size or
// every telemetry.flush_every. The keys, built only through
// keyspace.Keyspace.Metric, are:
//
//	{prefix}m:{endpoint}:{minute}              requests per endpoint
//	{prefix}m:escola:{escola_id}:{minute}      requests per school (verified identity)
//	{prefix}m:blocked:{endpoint}:{minute}      enforced rate-limit blocks (429)
//	{prefix}m:would_block:{endpoint}:{minute}  observe-mode would-blocks
//	{prefix}m:status:{code}:{minute}           responses per status code
//
// where minute is the UTC minute (YYYYMMDDHHMM) and endpoint is
// "{route}:{template}", the path with numeric, UUID and long hex segments
// replaced by {id} ("portal:/api/alunos/{id}"), capped per route and
// minute (the overflow counts as "{route}:other").
//
// An Aggregator SCANs those counters and upserts them into
// gateway_metrics (environment, kind, dimension, minute, count) under a
// distributed lock; a re-run sets the same rows. Run repeats it on an
// interval, with retries, inside `borda serve`.
package telemetry
