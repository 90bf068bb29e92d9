package relaxaudit

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/olp-edu/borda/ratelimit"
)

// Origins recorded in limit_relaxes.origin.
const (
	OriginCLI  = "cli"  // borda limits relax
	OriginPage = "page" // the operator page's relax form
)

// Bounds of the recorded text, in runes (the page's inputs carry the
// same maxlength).
const (
	MaxOperator = 100
	MaxReason   = 500
)

// Request is a relax as the operator typed it: the CLI's flags or the
// form's fields, not yet parsed.
type Request struct {
	// Rule is a rate_limits.rules[].name.
	Rule string
	// Factor is a decimal number in [1, ratelimit.MaxRelaxFactor]
	// (strconv.ParseFloat).
	Factor string
	// For is a Go duration in (0, ratelimit.MaxRelax] ("30m").
	For string
	// Operator and Reason are who and why, recorded (required, printable,
	// at most MaxOperator and MaxReason runes).
	Operator, Reason string
}

// Relax is a parsed, valid Request.
type Relax struct {
	Rule             string
	Factor           float64
	For              time.Duration
	Operator, Reason string
}

// maxFor is ratelimit.MaxRelax as a person writes it ("24h").
var maxFor = strings.TrimSuffix(strings.TrimSuffix(ratelimit.MaxRelax.String(), "0s"), "0m")

// Problem is one refused field of a Request. Field is the request's
// field in lower case (rule, factor, for, operator, reason): the CLI
// prints it as its flag (--factor), the page as its label.
type Problem struct {
	Field, Message string
}

// Parse reads req against the configured rule names. It returns every
// problem at once (nil: rx is valid); surrounding white space of each
// field is ignored.
func Parse(req Request, rules []string) (rx Relax, problems []Problem) {
	add := func(field, format string, args ...any) {
		problems = append(problems, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	rx.Rule = strings.TrimSpace(req.Rule)
	if !slices.Contains(rules, rx.Rule) {
		add("rule", "%s: not a rule in rate_limits.rules", strconv.Quote(rx.Rule))
	}
	factor := strings.TrimSpace(req.Factor)
	f, err := strconv.ParseFloat(factor, 64)
	switch {
	case factor == "":
		add("factor", "required: the number the rule's limit is multiplied by, between 1 and %d", ratelimit.MaxRelaxFactor)
	case err != nil:
		add("factor", "%s is not a number (want one between 1 and %d, e.g. 2 or 1.5)", strconv.Quote(factor), ratelimit.MaxRelaxFactor)
	case math.IsNaN(f) || f < 1 || f > ratelimit.MaxRelaxFactor:
		add("factor", "must be between 1 and %d (a relax raises limits; it never turns a rule off)", ratelimit.MaxRelaxFactor)
	default:
		rx.Factor = f
	}
	dur := strings.TrimSpace(req.For)
	d, err := time.ParseDuration(dur)
	switch {
	case dur == "":
		add("for", "required: how long the relax lasts (e.g. 30m; at most %s)", maxFor)
	case err != nil:
		add("for", "%s is not a duration (want e.g. 30m or 2h; at most %s)", strconv.Quote(dur), maxFor)
	case d <= 0 || d > ratelimit.MaxRelax:
		add("for", "must be positive and at most %s", maxFor)
	default:
		rx.For = d
	}
	rx.Operator = strings.TrimSpace(req.Operator)
	if msg := recordable(rx.Operator, MaxOperator, "who relaxes"); msg != "" {
		add("operator", "%s", msg)
	}
	rx.Reason = strings.TrimSpace(req.Reason)
	if msg := recordable(rx.Reason, MaxReason, "why"); msg != "" {
		add("reason", "%s", msg)
	}
	if problems != nil {
		return Relax{}, problems
	}
	return rx, nil
}

// recordable says what is wrong with s as recorded text ("" : nothing):
// empty, longer than max runes, or holding what a text column, a
// terminal or a log line would not keep as typed (invalid UTF-8, control
// and format characters: NUL, escapes, bidi overrides).
func recordable(s string, max int, what string) string {
	switch {
	case s == "":
		return "required: " + what + " (recorded in limit_relaxes)"
	case !utf8.ValidString(s):
		return "must be text (it is not valid UTF-8)"
	case utf8.RuneCountInString(s) > max:
		return fmt.Sprintf("at most %d characters", max)
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return "must be printable text (no control or format characters)"
		}
	}
	return ""
}
