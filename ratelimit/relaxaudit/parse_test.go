package relaxaudit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/ratelimit/relaxaudit"
)

var rules = []string{"burst", "api"}

func valid() relaxaudit.Request {
	return relaxaudit.Request{Rule: "burst", Factor: "2", For: "30m", Operator: "ana.plantao", Reason: "matrícula: fila no portal"}
}

func TestParseReadsAValidRequest(t *testing.T) {
	req := valid()
	req.Factor, req.For, req.Operator = " 1.5 ", "2h", "  ana  "
	rx, problems := relaxaudit.Parse(req, rules)
	if problems != nil {
		t.Fatalf("problems: %v", problems)
	}
	want := relaxaudit.Relax{Rule: "burst", Factor: 1.5, For: 2 * time.Hour, Operator: "ana", Reason: "matrícula: fila no portal"}
	if rx != want {
		t.Fatalf("Parse = %+v, want %+v", rx, want)
	}
	for _, edge := range []struct{ factor, dur string }{{"1", "1s"}, {"100", "24h"}, {"1e2", "1440m"}} {
		req.Factor, req.For = edge.factor, edge.dur
		if _, problems := relaxaudit.Parse(req, rules); problems != nil {
			t.Errorf("factor %s for %s refused: %v", edge.factor, edge.dur, problems)
		}
	}
}

// TestParseRefusesEveryBadField: each class of bad input, several members
// each, refused with the field named and a message saying what is wanted;
// nothing of a refused request is returned.
func TestParseRefusesEveryBadField(t *testing.T) {
	cases := []struct {
		field, value, want string
	}{
		{"rule", "", "not a rule"},
		{"rule", "nope", "not a rule"},
		{"rule", "BURST", "not a rule"},
		{"factor", "", "required"},
		{"factor", "abc", "is not a number"},
		{"factor", "2x", "is not a number"},
		{"factor", "0.5", "between 1 and 100"},
		{"factor", "0", "between 1 and 100"},
		{"factor", "-3", "between 1 and 100"},
		{"factor", "101", "between 1 and 100"},
		{"factor", "1e308", "between 1 and 100"},
		{"factor", "Inf", "between 1 and 100"},
		{"factor", "NaN", "between 1 and 100"},
		{"for", "", "required"},
		{"for", "30", "is not a duration"},
		{"for", "soon", "is not a duration"},
		{"for", "0s", "positive and at most 24h"},
		{"for", "-5m", "positive and at most 24h"},
		{"for", "25h", "positive and at most 24h"},
		{"operator", "", "required"},
		{"operator", "   ", "required"},
		{"operator", strings.Repeat("a", relaxaudit.MaxOperator+1), "at most 100"},
		{"operator", "ana\x00", "printable"},
		{"operator", "ana\x1b[31m", "printable"},
		{"reason", "", "required"},
		{"reason", "fila\u202enoitrop", "printable"},
		{"reason", "bad \xff utf-8", "not valid UTF-8"},
		{"reason", "line\nbreak", "printable"},
		{"reason", strings.Repeat("é", relaxaudit.MaxReason+1), "at most 500"},
	}
	for _, c := range cases {
		req := valid()
		switch c.field {
		case "rule":
			req.Rule = c.value
		case "factor":
			req.Factor = c.value
		case "for":
			req.For = c.value
		case "operator":
			req.Operator = c.value
		case "reason":
			req.Reason = c.value
		}
		rx, problems := relaxaudit.Parse(req, rules)
		if len(problems) != 1 || problems[0].Field != c.field || !strings.Contains(problems[0].Message, c.want) {
			t.Errorf("%s = %q: problems %+v, want one on %s saying %q", c.field, c.value, problems, c.field, c.want)
		}
		if rx != (relaxaudit.Relax{}) {
			t.Errorf("%s = %q: a refused request returned %+v", c.field, c.value, rx)
		}
	}
}

func TestParseNamesEveryProblemAtOnce(t *testing.T) {
	_, problems := relaxaudit.Parse(relaxaudit.Request{Rule: "nope", Factor: "0.5", For: "x"}, rules)
	var fields []string
	for _, p := range problems {
		fields = append(fields, p.Field)
	}
	if got := strings.Join(fields, ","); got != "rule,factor,for,operator,reason" {
		t.Fatalf("fields = %s, want rule,factor,for,operator,reason", got)
	}
}
