package deadletter

import "testing"

func TestSameIDMatchesTheIDAndThePrintedFormOnly(t *testing.T) {
	for _, c := range []struct {
		id, given string
		want      bool
	}{
		{"ev-1", "ev-1", true},
		{"ev-\xff", `"ev-\xff"`, true},
		{"ev-\u202eabc", `"ev-\u202eabc"`, true},
		{"ev-\x1b[2J", `"ev-\x1b[2J"`, true},
		{"ev-\x1b[2J", "ev-\x1b[2J", true},
		{`"ev-1"`, `"ev-1"`, true}, // a printable id with quotes is its own printed form
		{"ev-1", `"ev-1"`, false},  // a printable id is never printed quoted
		{"ev-\xff", "ev-\ufffd", false},
		{"", "", false},
		{"ev-1", "", false},
	} {
		if got := SameID(c.id, c.given); got != c.want {
			t.Errorf("SameID(%q, %q) = %v, want %v", c.id, c.given, got, c.want)
		}
	}
	if Printed("") != "" || Printed("ev 1") != "ev 1" || Printed(" ev") != `" ev"` || Printed("a\tb") != `"a\tb"` {
		t.Errorf("Printed: %q %q %q %q", Printed(""), Printed("ev 1"), Printed(" ev"), Printed("a\tb"))
	}
}
