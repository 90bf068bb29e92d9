package configs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/olp-edu/borda/configs"
)

// rulesYAML is a minimal valid file with rule as its only rate-limit rule.
func rulesYAML(rule string) []byte {
	return []byte("environment: development\nroutes:\n  - name: portal\n    path_prefix: /\n    upstream: http://127.0.0.1:1\nrate_limits:\n  rules:\n" + rule)
}

// The one validation path of the rules (the limiter compiles only what
// passed it): a reload with a bad rule is refused by configs naming each
// bad field, every problem at once.
func TestValidateRateLimitsNamesEveryBadRuleField(t *testing.T) {
	t.Parallel()
	_, err := configs.Parse(rulesYAML("    - {name: burst, scope: planet, limit: 0, window: 1s, routes: ['*']}\n"), noEnv)
	var ve *configs.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) < 2 {
		t.Fatalf("err = %v, want a ValidationError with both problems", err)
	}
	for _, field := range []string{"rate_limits.rules[0].scope", "rate_limits.rules[0].limit"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
}

// gcra and sliding_window count only the hits they let pass, so they have
// one limit: observe_limit is refused naming the field.
func TestObserveLimitIsRefusedWithGCRAAndSlidingWindow(t *testing.T) {
	t.Parallel()
	for _, algo := range []string{"gcra", "sliding_window"} {
		_, err := configs.Parse(rulesYAML("    - {name: burst, scope: ip, algorithm: "+algo+", limit: 10, observe_limit: 5, window: 1s, routes: ['*']}\n"), noEnv)
		if err == nil || !strings.Contains(err.Error(), "rate_limits.rules[0].observe_limit") {
			t.Errorf("%s with observe_limit: err = %v", algo, err)
		}
	}
}

// An unknown algorithm names the three.
func TestUnknownAlgorithmNamesTheThree(t *testing.T) {
	t.Parallel()
	_, err := configs.Parse(rulesYAML("    - {name: burst, scope: ip, algorithm: sliding, limit: 10, window: 1s, routes: ['*']}\n"), noEnv)
	if err == nil || !strings.Contains(err.Error(), "fixed_window, gcra, sliding_window") {
		t.Fatalf("algorithm sliding: err = %v", err)
	}
}

// rate_limits.sync is 0 or an interval up to 10s below every rule's
// window; a bad one is refused naming the field.
func TestSyncIntervalIsBoundedByTheRulesWindows(t *testing.T) {
	t.Parallel()
	rule := "    - {name: burst, scope: ip, limit: 10, window: 5s, routes: ['*']}\n"
	ok, err := configs.Parse(append([]byte("environment: development\nrate_limits:\n  sync: 50ms\n  rules:\n"), rule...), noEnv)
	if err != nil || ok.RateLimits.Sync.D().Milliseconds() != 50 {
		t.Fatalf("sync 50ms: %v (%v)", err, ok.RateLimits.Sync)
	}
	for _, bad := range []string{"-1s", "5s", "11s"} {
		_, err := configs.Parse(append([]byte("environment: development\nrate_limits:\n  sync: "+bad+"\n  rules:\n"), rule...), noEnv)
		if err == nil || !strings.Contains(err.Error(), "rate_limits.sync") {
			t.Errorf("sync %s: err = %v, want rate_limits.sync refused", bad, err)
		}
	}
}

// A gcra rule allows at most 10 a millisecond of its window (an emission
// interval of 0.1 ms): past it the error names the limit field and
// sliding_window (fresh attack pass 25 R06: 3 000 000 a second counted
// nothing on Redis).
func TestGCRALimitPastTenPerMillisecondIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit, window string
		ok            bool
	}{
		{"10000", "1s", true}, {"10001", "1s", false}, {"600000", "1m", true}, {"600001", "1m", false}, {"3000000", "1s", false},
	} {
		_, err := configs.Parse(rulesYAML("    - {name: g, scope: route, algorithm: gcra, limit: "+tc.limit+", window: "+tc.window+", routes: ['*']}\n"), noEnv)
		switch {
		case tc.ok && err != nil:
			t.Errorf("gcra %s per %s: %v, want accepted", tc.limit, tc.window, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "rate_limits.rules[0].limit") || !strings.Contains(err.Error(), "sliding_window")):
			t.Errorf("gcra %s per %s: err = %v, want refused naming the limit and sliding_window", tc.limit, tc.window, err)
		}
	}
	if _, err := configs.Parse(rulesYAML("    - {name: s, scope: route, algorithm: sliding_window, limit: 3000000, window: 1s, routes: ['*']}\n"), noEnv); err != nil {
		t.Errorf("a sliding window of 3 000 000 a second: %v, want accepted", err)
	}
}
