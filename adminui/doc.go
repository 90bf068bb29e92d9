// Package adminui provides the operator page of `borda serve` on the
// admin listener (docs/operations.md): server-rendered HTML (html/template,
// an embedded stylesheet, no JavaScript) showing the routes in effect, the
// rate limiter, the webhook pipeline and the forwarders, and the dead
// letters, with two mutating actions, replaying a dead letter and relaxing
// a rate-limit rule, which need the operator token (ADMIN_TOKEN).
//
// The package reads everything through the small interfaces of Sources,
// which cmd/borda adapts from the running components; it imports none of
// them.
//
// Paths (Handler; Mount puts them beside the admin listener's own):
//
//	GET  /ui                     overview: routes, limiter, pipeline
//	GET  /ui/dead-letters        the dead letters (bounded, cached listing)
//	POST /ui/dead-letters/replay replay one (token, operator, reason)
//	POST /ui/relax               relax a rule (token, factor, for, operator, reason)
//	GET  /ui/style.css           the stylesheet
package adminui
