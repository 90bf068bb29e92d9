package ratelimit

import "time"

// Subject is what one request is counted as. The gateway fills it: IP is
// the client IP already grouped (IPv4 as is, IPv6 by its /64 prefix as
// "2001:db8:1:2::/64"); User and Escola are empty unless the request
// carries a verified identity.
type Subject struct {
	Route  string
	IP     string
	User   string
	Escola string
}

// Outcome is the result of one rule for one request, as counted in
// borda_ratelimit_decisions_total{rule,decision}.
type Outcome string

// Outcomes.
const (
	OutcomeAllow      Outcome = "allow"       // under the limit
	OutcomeBlock      Outcome = "block"       // over the limit, enforced: 429
	OutcomeWouldBlock Outcome = "would_block" // over the (observe) limit, observe mode: passes
	OutcomeError      Outcome = "error"       // store failed or timed out: fail-open
	OutcomeSkip       Outcome = "skip"        // rule does not apply (no verified identity)
)

// Decision is one rule's verdict for one request.
type Decision struct {
	// Rule is the rule's name ("burst").
	Rule string
	// Scope is the rule's scope.
	Scope Scope
	// Outcome is what happened.
	Outcome Outcome
	// Limit is the rule's limit per Window (after any relax factor).
	Limit int64
	// Remaining is how many more requests the window allows (≥ 0).
	Remaining int64
	// Window is the rule's window.
	Window time.Duration
	// ResetAfter is the time until the window resets (0 when unknown).
	ResetAfter time.Duration
	// RetryAfter is the wait before a retry may pass (0 unless blocked or
	// would-block).
	RetryAfter time.Duration
	// Message is the rule's PT-BR message, {retry_after} already replaced;
	// set on OutcomeBlock only.
	Message string
}

// Verdict is the result of every rule that applies to one request.
type Verdict struct {
	// Decisions lists one Decision per rule that applied, skipped rules
	// included, in configuration order. Empty when no rule covers the
	// route. A request refused from the local deny cache lists only the
	// refusing and the skipped rules.
	Decisions []Decision
}

// Blocked reports whether any enforced rule blocks the request.
func (v Verdict) Blocked() bool {
	for _, d := range v.Decisions {
		if d.Outcome == OutcomeBlock {
			return true
		}
	}
	return false
}

// WouldBlock reports whether any rule in observe mode would have blocked
// the request.
func (v Verdict) WouldBlock() bool {
	for _, d := range v.Decisions {
		if d.Outcome == OutcomeWouldBlock {
			return true
		}
	}
	return false
}
