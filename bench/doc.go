// Package bench is the home of Borda's load, soak and fault harness: Go
// programs, loopback only, bounded in time and count, one command each.
//
//	go run ./bench/cmd/load    # req/s at saturation and p50/p99 at 1 000 req/s, as ratios
//	go run ./bench/cmd/ingress # webhook req/s against a bare amqp091-go publisher; p50/p99 at 500 req/s
//	go run ./bench/cmd/soak    # RSS, goroutines, fds flat over N minutes; every confirm in RabbitMQ
//	go run ./bench/cmd/faults  # Redis and RabbitMQ faults under load, with the accounting
//
// Each takes -ci for the short version scripts/bench-smoke.sh runs in CI.
// The figures and the exact commands are in docs/performance.md and
// docs/reliability.md.
package bench
