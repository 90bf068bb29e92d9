package adminui

import (
	"context"
	"strings"
	"time"
)

// Sources is what the page reads. Routes and Limiter are required; a nil
// Pipeline or DeadLetters shows that part as not configured.
type Sources struct {
	Routes      RouteSource
	Limiter     LimiterSource
	Pipeline    PipelineSource
	DeadLetters DeadLetterSource
	// Rollout is the rollout section (rollout.go); nil: not shown.
	Rollout RolloutSource
	// Relaxer relaxes a rule from the Routes table (relax.go); nil: the
	// page offers no relax.
	Relaxer RelaxSource
}

// RouteSource gives the routes in effect, in configuration order.
type RouteSource interface {
	Routes() []Route
}

// LimiterSource gives the rate limiter's state now.
type LimiterSource interface {
	Limiter(ctx context.Context) LimiterState
}

// PipelineSource gives the webhook pipeline's state now.
type PipelineSource interface {
	Pipeline(ctx context.Context) PipelineState
}

// DeadLetterSource lists and replays dead letters. List must be lossless
// (webhook/deadletter: one bounded pass, put back as confirmed copies);
// the page bounds and caches how often it is called.
type DeadLetterSource interface {
	// List returns up to limit dead letters, oldest first.
	List(ctx context.Context, limit int) ([]DeadLetter, error)
	// Replay republishes the dead letter req.ID to the forward queue and
	// records who and why (webhook_replays). ErrNotFound when no dead
	// letter has that id.
	Replay(ctx context.Context, req ReplayRequest) (ReplayResult, error)
}

// Route is one route as in effect.
type Route struct {
	Name       string
	Hosts      []string // empty: any host
	PathPrefix string
	// Upstream is the upstream URL, redacted (internal/redact.URL).
	Upstream string
	Rules    []Rule
	// CORS names the policy and summarises it ("portal: origins
	// https://a, https://b; credentials"); empty: no CORS handling.
	CORS string
	// Cookies lists the forwarded cookies ("olp_auth → Authorization:
	// Bearer"); empty: none.
	Cookies []string
}

// Rule is one rate-limit rule applied to a route.
type Rule struct {
	Name, Scope, Algorithm string
	// Mode is enforce, observe or off.
	Mode   string
	Limit  int64
	Window time.Duration
	// ObserveLimit > 0 is a tighter limit tried in observe mode.
	ObserveLimit int64
	// InForce is the limit in force while a relax of this rule lasts
	// (floor(Limit × Relax.Factor), as the limiter applies it); the page
	// fills it and Relax from LimiterState.Relaxes. 0: no relax.
	InForce int64
	Relax   *Relax
}

// LimiterState is the rate limiter now and over the last Span.
type LimiterState struct {
	// Store is redis, rest or memory; StoreState "ok" or what is wrong.
	Store, StoreState string
	// Breaker is closed, half-open, open, or none (embedded store).
	Breaker string
	// Relaxes are the relax factors in force; RelaxNote says why they are
	// unknown or do not apply (empty: read). RelaxPoll is how soon every
	// gateway applies a new relax (rate_limits.relax_poll; 0: unknown).
	Relaxes   []Relax
	RelaxNote string
	RelaxPoll time.Duration
	// Span is what Rules and FailOpens cover (the last minutes, shorter
	// right after start).
	Span      time.Duration
	Rules     []RuleCounts
	FailOpens []ReasonCount
	// TopWouldBlock are the endpoints with the most observe-mode
	// would-blocks over TopSpan (the telemetry counters); TopNote says why
	// there are none to show (telemetry off).
	TopWouldBlock []EndpointCount
	TopSpan       time.Duration
	TopNote       string
}

// RelaxSource relaxes a rule's limit for a while, recording who and why
// as `borda limits relax` does (the same parser and audit).
type RelaxSource interface {
	// Unavailable says why this gateway cannot relax from the page (the
	// embedded store, no database for the audit); "" when it can.
	Unavailable() string
	// Relax parses req as `borda limits relax` parses its flags, records
	// it and writes it to the shared store. A *BadRelax error is the
	// request's fault (the page answers 400 with each problem); any
	// other error means no relax is in force (503 with the error).
	Relax(ctx context.Context, req RelaxRequest) (RelaxResult, error)
}

// RelaxRequest is the relax form as typed.
type RelaxRequest struct {
	// Rule is the rule's name; Factor a number in [1, 100]; For a Go
	// duration in (0, 24h]; Operator and Reason who and why (recorded).
	Rule, Factor, For, Operator, Reason string
}

// RelaxResult is a relax in force: its factor, when it ends, and the
// audit row (limit_relaxes) that records it.
type RelaxResult struct {
	Rule    string
	Factor  float64
	Until   time.Time
	AuditID int64
	// Warning is said beside the success (the relax is in force but its
	// audit row stayed pending); empty: none.
	Warning string
}

// BadRelax is a relax form refused for what it says: each problem names
// its field (rule, factor, for, operator, reason).
type BadRelax struct {
	Problems []FieldProblem
}

// FieldProblem is one refused field of a form.
type FieldProblem struct {
	Field, Message string
}

func (e *BadRelax) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Field + ": " + p.Message
	}
	return "adminui: relax refused: " + strings.Join(parts, "; ")
}

// Relax is one relax factor in force until Until.
type Relax struct {
	Rule   string
	Factor float64
	Until  time.Time
}

// RuleCounts are one rule's decisions over the span.
type RuleCounts struct {
	Rule                                             string
	Decisions, Blocks, WouldBlocks, FailOpens, Skips int64
}

// ReasonCount is a count by reason (fail-opens: timeout, error,
// breaker_open).
type ReasonCount struct {
	Reason string
	Count  int64
}

// EndpointCount is a count by endpoint ("portal:/api/alunos/{id}").
type EndpointCount struct {
	Endpoint string
	Count    int64
}

// PipelineState is the webhook pipeline now.
type PipelineState struct {
	// Configured is false when `borda serve` has no webhook ingress.
	Configured bool
	Broker     Broker
	Queues     []Queue
	// Forwarders are the live `borda forward` workers; ForwardersNote says
	// why they are unknown (no Redis) or none is running.
	Forwarders     []Forwarder
	ForwardersNote string
}

// Broker is the ingress's broker connection and its confirms.
type Broker struct {
	Connected, Blocked bool
	// Problem is the publisher's readiness error (empty: ready).
	Problem string
	// ConfirmP50 and ConfirmP95 over ConfirmSpan, from Confirms
	// observations (0: none).
	ConfirmP50, ConfirmP95 time.Duration
	Confirms               int64
	ConfirmSpan            time.Duration
	// Unconfirmed publishes await the broker's confirm now.
	Unconfirmed int64
	// PublishFailures over ConfirmSpan, by reason.
	PublishFailures []ReasonCount
}

// Queue is one queue of the pipeline.
type Queue struct {
	Name string
	// Role is forward, retry 1m, dead-letter, events.
	Role string
	// Depth is ready messages; -1 when unknown (Err says why).
	Depth int64
	// OldestAge is the age of the oldest message when known (AgeKnown).
	OldestAge time.Duration
	AgeKnown  bool
	AgeNote   string
	Err       string
	// Warn is a warning about the queue (the events queue has no
	// consumer and grows); empty: none.
	Warn string
}

// Forwarder is one `borda forward` worker's last snapshot.
type Forwarder struct {
	Instance      string
	Breaker       string
	BreakerSince  time.Time
	LastFailure   string
	LastFailureAt time.Time
	OpenedBy      string
	Connected     bool
	Consuming     bool
	Problems      []string
	QueueDepth    int64
	DLQDepth      int64
	OldestAge     time.Duration
	// SampledAt is when the worker sampled QueueDepth, DLQDepth and
	// OldestAge (every 15 s; zero: unknown); SeenAt when it wrote this.
	SampledAt time.Time
	SeenAt    time.Time
	// Duplicates: events acked without a POST as already forwarded;
	// LastDuplicateKey (message data: shown printed) at LastDuplicateAt.
	Duplicates       int64
	LastDuplicateKey string
	LastDuplicateAt  time.Time
}

// DeadLetter is one dead-lettered event. Every field is hostile input
// (event ids and replies come from providers and the legacy endpoint):
// the page escapes them.
type DeadLetter struct {
	ID, Source string
	// Reason is why it was dead-lettered; FirstReason why its first
	// attempt failed.
	Reason, FirstReason string
	// Status is the legacy endpoint's last HTTP status (0: none), Excerpt
	// its reply (redacted by the forwarder).
	Status   int
	Excerpt  string
	Attempts int
	// DeadLetteredAt, FirstFailure and ReceivedAt are zero when unknown.
	DeadLetteredAt, FirstFailure, ReceivedAt time.Time
	// BodyPreview is the event body, redacted and cut (Preview).
	BodyPreview string
}

// ReplayRequest asks to replay one dead letter.
type ReplayRequest struct {
	ID, Operator, Reason string
}

// ReplayResult is a replay's outcome: the webhook_replays row and
// "republished" (or "failed" with an error).
type ReplayResult struct {
	AuditID int64
	Outcome string
}
