package ingress

import (
	"encoding/json"
	"strings"
	"testing"
)

// A number no reader can hold alike is refused 400 NUMBER_OUT_OF_RANGE
// like a lone surrogate (fresh attack pass 3 W12: {"a":1e999999} was
// acknowledged 200 although PostgreSQL's jsonb and encoding/json refuse
// it). Out of range: beyond float64 (encoding/json's error is the oracle
// here) or beyond PostgreSQL's numeric (the figures checked with psql
// 'select ...::jsonb': 1e-16384, 1.5e-16383, 0e-16384 and 0. with 16 384
// zeros overflow it; 1.5e-16382, 0e999999 and 1e-400 do not; 1e131071
// fits it but not float64, and is refused), at any depth and in any member; the in-range shapes
// pass.
func TestWebhookNumberOutOfRangeIsRefused(t *testing.T) {
	t.Parallel()
	i, _ := newUnitIngress(t, unitConfig(), &fakePublisher{})
	zeros := strings.Repeat("0", 16384)
	bad := []string{"1e999999", "-1e400", "1e309", "1.8e308", "-1.8E+308", "1" + strings.Repeat("0", 400),
		"1e99999999999999999999", "1e131071", "1e-16384", "1.5e-16383", "0." + zeros, "1." + zeros, "0e-16384", "1e-99999999999999999999",
		// PostgreSQL refuses the exponent whatever the digits (fresh attack pass 6 W01).
		"0e2147483647", "-0E+2147483647", "0e99999999999999999999", "0e1073741823", "0.0e-1073741823"}
	for _, n := range bad {
		for _, body := range []string{`{"a":` + n + `}`, `{"data":{"x":[1,` + n + `]}}`, `{"event":"messages.upsert","instance":"i","data":{"n":` + n + `}}`} {
			if !json.Valid([]byte(body)) {
				t.Fatalf("%s is not JSON", body)
			}
			if got := jsonRefused([]byte(body)); got != ReasonNumberOutOfRange {
				t.Errorf("%.60s: jsonRefused %q, want %s", body, got, ReasonNumberOutOfRange)
			}
		}
		expectInvalid(t, req{target: "/webhooks/whatsapp", body: `{"a":` + n + `}`, headers: bearer("test-token")}.do(i), ReasonNumberOutOfRange, n)
	}
	for _, n := range []string{"0", "-0", "1e308", "1.7976931348623157e308", "-1.7976931348623157e308", "1e-400", "1.5e-16382",
		"0e999999", "0.0e99999999", "123456789012345678901234567890", "1" + strings.Repeat("0", 300), "-12.5E-3"} {
		body := `{"a":` + n + `,"s":"1e999999 -1e400"}`
		if got := jsonRefused([]byte(body)); got != "" {
			t.Errorf("%.60s: jsonRefused %q, want in range", body, got)
		}
	}
	// The float64 half agrees with encoding/json.
	for _, n := range []string{"1e309", "1.7976931348623157e308", "1.7976931348623159e308", "-1e400", "4e308"} {
		var v any
		goRefuses := json.Unmarshal([]byte(n), &v) != nil
		if numberOutOfRange([]byte(n)) != goRefuses {
			t.Errorf("%s: out of range %v, encoding/json refuses %v", n, !goRefuses, goRefuses)
		}
	}
}

// TestTopLevelScalarBodiesAreJudged: a body that is one number, string
// or literal (valid JSON) is judged like any value inside an object,
// reading nothing past the body's last byte.
func TestTopLevelScalarBodiesAreJudged(t *testing.T) {
	for body, want := range map[string]string{
		"12": "", "-0.5e-3": "", "1e999999": ReasonNumberOutOfRange, "-1e400": ReasonNumberOutOfRange,
		`"x"`: "", `"\ud83d"`: ReasonInvalidUTF8, `"\ud83d\ude00"`: "", "true": "", "null": "",
	} {
		b := []byte(body)
		if got := jsonRefused(b[:len(b):len(b)]); got != want {
			t.Errorf("jsonRefused(%s) = %q, want %q", body, got, want)
		}
	}
}
