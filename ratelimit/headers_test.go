package ratelimit

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/olp-edu/borda/keyspace"
)

func TestWriteTooManyRequests_HeadersAndProblemBody(t *testing.T) {
	t.Parallel()
	v := Verdict{Decisions: []Decision{
		{Rule: "burst", Scope: ScopeIP, Outcome: OutcomeBlock, Limit: 5, Remaining: 0, Window: 5 * time.Second,
			ResetAfter: 2100 * time.Millisecond, RetryAfter: 2100 * time.Millisecond,
			Message: "Muitas requisições em sequência. Tente novamente em 3 segundos."},
		{Rule: "api", Scope: ScopeUser, Outcome: OutcomeAllow, Limit: 600, Remaining: 590, Window: time.Minute, ResetAfter: 41500 * time.Millisecond},
		{Rule: "escola", Scope: ScopeEscola, Outcome: OutcomeSkip},
	}}
	rec := httptest.NewRecorder()
	rec.Header().Set("Vary", "Origin")
	rec.Header().Set("Access-Control-Allow-Origin", "https://portal.example.org")
	WriteTooManyRequests(rec, v)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("status = %d", rec.Code)
	}
	want := map[string]string{
		"Retry-After":                 "3",
		"X-RateLimit-Limit":           "5",
		"X-RateLimit-Remaining":       "0",
		"X-RateLimit-Reset":           "3",
		"RateLimit-Policy":            `"burst";q=5;w=5, "api";q=600;w=60`,
		"RateLimit":                   `"burst";r=0;t=3, "api";r=590;t=42`,
		"Content-Type":                "application/problem+json",
		"Content-Language":            "pt-BR",
		"Vary":                        "Origin",
		"Access-Control-Allow-Origin": "https://portal.example.org",
	}
	for k, w := range want {
		if got := rec.Header().Get(k); got != w {
			t.Errorf("%s = %q, want %q", k, got, w)
		}
	}
	if rec.Header().Get(HeaderWouldBlock) != "" {
		t.Error("Would-Block set on a plain block")
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	wantBody := map[string]any{
		"type":              "https://iana.org/assignments/http-problem-types#quota-exceeded",
		"title":             "Muitas requisições",
		"status":            float64(429),
		"detail":            "Muitas requisições em sequência. Tente novamente em 3 segundos.",
		"violated-policies": []any{"burst"},
		"scope":             "ip",
		"retry_after":       float64(3),
	}
	gotJSON, _ := json.Marshal(body)
	wantJSON, _ := json.Marshal(wantBody)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("body = %s\nwant   %s", gotJSON, wantJSON)
	}
}

func TestWriteHeaders_MostRestrictiveDecidesRetryAfter(t *testing.T) {
	t.Parallel()
	v := Verdict{Decisions: []Decision{
		{Rule: "burst", Scope: ScopeIP, Outcome: OutcomeBlock, Limit: 5, Window: 5 * time.Second, RetryAfter: 2 * time.Second, ResetAfter: 2 * time.Second, Message: "a"},
		{Rule: "api", Scope: ScopeUser, Outcome: OutcomeBlock, Limit: 600, Window: time.Minute, RetryAfter: 40 * time.Second, ResetAfter: 40 * time.Second, Message: "Você fez muitas requisições. Tente novamente em 40 segundos."},
	}}
	rec := httptest.NewRecorder()
	WriteTooManyRequests(rec, v)
	if got := rec.Header().Get("Retry-After"); got != "40" {
		t.Fatalf("Retry-After = %s, want 40", got)
	}
	if got := rec.Header().Get("X-RateLimit-Limit"); got != "600" {
		t.Fatalf("X-RateLimit-Limit = %s, want 600", got)
	}
	p := NewProblem(v)
	if p.Scope != "user" || len(p.ViolatedPolicies) != 2 || p.Detail != v.Decisions[1].Message {
		t.Fatalf("problem = %+v", p)
	}
}

func TestWriteHeaders_ObserveMarksWouldBlock(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	WriteHeaders(h, Verdict{Decisions: []Decision{{Rule: "api", Outcome: OutcomeWouldBlock, Limit: 10, Window: time.Minute, ResetAfter: 10 * time.Second, RetryAfter: 10 * time.Second}}})
	if h.Get(HeaderWouldBlock) != "true" || h.Get(HeaderRetryAfter) != "" {
		t.Fatalf("headers = %v", h)
	}
}

func TestWriteHeaders_NothingWhenNoRuleCounted(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	WriteHeaders(h, Verdict{Decisions: []Decision{{Rule: "api", Outcome: OutcomeSkip}, {Rule: "burst", Outcome: OutcomeError}}})
	if len(h) != 0 {
		t.Fatalf("headers = %v", h)
	}
}

// TestWriteTooManyRequests_RetryAfterWholeSecondsOnlyOn429: limit 5/min; the 6th
// request's Retry-After is whole seconds in [1, 60] (never milliseconds,
// never negative), and an allowed response carries none.
func TestWriteTooManyRequests_RetryAfterWholeSecondsOnlyOn429(t *testing.T) {
	t.Parallel()
	for _, algo := range []Algorithm{FixedWindow, GCRA} {
		t.Run(algo.String(), func(t *testing.T) {
			t.Parallel()
			r := Rule{Name: "api", Scope: ScopeUser, Algorithm: algo, Limit: 5, Window: time.Minute, Routes: []string{"*"}}
			l, _ := newTestLimiter(t, rulesConfig(r), keyspace.MustNew("olp-dev:edge16:"), NewMemoryStore(0))
			s := Subject{Route: "portal", IP: "192.0.2.1", User: "u-16"}
			for i := 1; i <= 5; i++ {
				v := l.Decide(context.Background(), s)
				rec := httptest.NewRecorder()
				WriteHeaders(rec.Header(), v)
				if v.Blocked() || rec.Header().Get("Retry-After") != "" {
					t.Fatalf("allowed request %d: blocked=%v Retry-After=%q", i, v.Blocked(), rec.Header().Get("Retry-After"))
				}
			}
			v := l.Decide(context.Background(), s)
			rec := httptest.NewRecorder()
			WriteTooManyRequests(rec, v)
			ra, err := strconv.Atoi(rec.Header().Get("Retry-After"))
			if err != nil || ra < 1 || ra > 60 {
				t.Fatalf("Retry-After = %q, want whole seconds in [1, 60]", rec.Header().Get("Retry-After"))
			}
			reset, err := strconv.Atoi(rec.Header().Get("X-RateLimit-Reset"))
			if err != nil || reset < 1 || reset > 60 {
				t.Fatalf("X-RateLimit-Reset = %q, want delta seconds in [1, 60]", rec.Header().Get("X-RateLimit-Reset"))
			}
		})
	}
}

// The X-RateLimit-* headers come from the most restrictive counted rule:
// a blocking one before any that allows (the longest Retry-After among
// blocking ones), else the fewest remaining (ties: the later reset); an
// exact tie keeps configuration order. X-RateLimit-Reset is the rule's
// reset, or its Retry-After (at least 1 s) when it blocks.
func TestWriteHeaders_MostRestrictiveRule(t *testing.T) {
	t.Parallel()
	allow := func(name string, limit, remaining int64, reset time.Duration) Decision {
		return Decision{Rule: name, Outcome: OutcomeAllow, Limit: limit, Remaining: remaining, Window: time.Minute, ResetAfter: reset}
	}
	block := func(name string, limit int64, retry, reset time.Duration) Decision {
		return Decision{Rule: name, Outcome: OutcomeBlock, Limit: limit, Window: time.Minute, RetryAfter: retry, ResetAfter: reset, Message: "m"}
	}
	for _, tc := range []struct {
		name         string
		ds           []Decision
		limit, reset string
	}{
		{"fewest remaining first", []Decision{allow("a", 10, 3, 10*time.Second), allow("b", 20, 10, 50*time.Second)}, "10", "10"},
		{"fewest remaining second", []Decision{allow("a", 20, 10, 50*time.Second), allow("b", 10, 3, 10*time.Second)}, "10", "10"},
		{"equal remaining: the later reset", []Decision{allow("a", 10, 3, 10*time.Second), allow("b", 20, 3, 50*time.Second)}, "20", "50"},
		{"an exact tie keeps the first", []Decision{allow("a", 10, 3, 10*time.Second), allow("b", 20, 3, 10*time.Second)}, "10", "10"},
		{"a block after an allow", []Decision{allow("a", 10, 0, 10*time.Second), block("b", 20, 3*time.Second, 500*time.Millisecond)}, "20", "3"},
		{"a block before an allow", []Decision{block("a", 20, 3*time.Second, 500*time.Millisecond), allow("b", 10, 0, 10*time.Second)}, "20", "3"},
		{"two blocks: the longer wait", []Decision{block("a", 20, 3*time.Second, time.Second), block("b", 30, 9*time.Second, time.Second)}, "30", "9"},
		{"two blocks, equal waits: the first", []Decision{block("a", 20, 3*time.Second, time.Second), block("b", 30, 3*time.Second, time.Second)}, "20", "3"},
		{"a block with no wait says 1 s", []Decision{block("a", 20, 0, 0)}, "20", "1"},
	} {
		h := http.Header{}
		WriteHeaders(h, Verdict{Decisions: tc.ds})
		if got, reset := h.Get(HeaderLimit), h.Get(HeaderReset); got != tc.limit || reset != tc.reset {
			t.Errorf("%s: X-RateLimit-Limit %s, -Reset %s; want %s, %s", tc.name, got, reset, tc.limit, tc.reset)
		}
	}
}

// The 429's Content-Length is its body's length, so a client or proxy
// that trusts it reads the whole problem and nothing more.
func TestWriteTooManyRequests_ContentLengthIsTheBodys(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	WriteTooManyRequests(rec, Verdict{Decisions: []Decision{{Rule: "burst", Scope: ScopeIP, Outcome: OutcomeBlock, Limit: 5,
		Window: 5 * time.Second, RetryAfter: 2 * time.Second, Message: "Muitas requisições em sequência. Tente novamente em 2 segundos."}}})
	if got, want := rec.Header().Get("Content-Length"), strconv.Itoa(rec.Body.Len()); got != want {
		t.Errorf("Content-Length %s, body %s bytes", got, want)
	}
}
