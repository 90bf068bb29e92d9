package deadletter

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printed is message data (an event id from a provider's body, a source,
// the endpoint's reply) as an operator is shown it: as is when it is valid
// UTF-8 with every rune printable (unicode.IsPrint: no control character,
// tab, escape or bidi override) and no leading or trailing space; else
// Go-quoted (strconv.Quote: "\r", "\x1b", "\xff", "\u202e"), so it can
// neither move a terminal's cursor, reorder text in a page, nor lose bytes
// on its way through a browser's form. Empty stays empty.
func Printed(s string) string {
	if s == "" {
		return s
	}
	if !utf8.ValidString(s) || strings.TrimSpace(s) != s || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// SameID reports whether given names the dead letter whose event id is
// id: given is the id itself or its Printed form, as `borda dlq list` and
// the operator page show it (so an id with a control character or invalid
// UTF-8 can be copied from them into `dlq show`, `dlq replay --id` and the
// page's replay form).
func SameID(id, given string) bool {
	return given != "" && (id == given || Printed(id) == given)
}
