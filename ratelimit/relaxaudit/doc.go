// Package relaxaudit is the one relax an operator runs, from `borda
// limits relax` and from the operator page's relax form alike: it reads
// the request as typed (Parse: the same fields, bounds and messages for
// both), records it in PostgreSQL limit_relaxes before the store is
// touched, writes the factor to the shared store with ratelimit.Relax,
// and records the outcome (Apply). A relax whose audit row cannot be
// written is not applied, as a dead-letter replay is not published
// without its webhook_replays row (docs/rate-limiting.md, "Relax during
// an incident").
package relaxaudit
