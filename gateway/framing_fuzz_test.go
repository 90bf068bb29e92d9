package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// FuzzMaxForwards: for any Max-Forwards value, parseMaxForwards accepts
// exactly one non-empty run of ASCII digits, and what an OPTIONS request
// forwards is one less than its value (capped), never the value itself
// nor anything that is not a number.
func FuzzMaxForwards(f *testing.F) {
	for _, s := range []string{"0", "5", "00", "-1", " 5", "5 ", "0x1", "", "99999999999999999999", "+3", "١", "5,5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, ok := parseMaxForwards([]string{v})
		digits := v != "" && strings.Trim(v, "0123456789") == ""
		if ok != digits {
			t.Fatalf("parseMaxForwards(%q) valid = %v, want %v", v, ok, digits)
		}
		if !ok || n == 0 {
			return
		}
		h := http.Header{"Max-Forwards": {v}}
		decrementMaxForwards(h, http.MethodOptions)
		got, err := strconv.ParseInt(h.Get("Max-Forwards"), 10, 64)
		if err != nil || got != n-1 || got > 1<<31-1 {
			t.Fatalf("Max-Forwards %q forwarded as %q (parsed %d)", v, h.Get("Max-Forwards"), n)
		}
	})
}

// FuzzClientClaimSpelling: every spelling of a forwarded-identity header
// a CGI-style or case-insensitive parser reads as the same name (any
// case per letter, '_' for '-') is recognised; mask picks the spelling.
func FuzzClientClaimSpelling(f *testing.F) {
	for i := range clientClaimHeaders {
		f.Add(uint16(i), uint64(0))
		f.Add(uint16(i), uint64(0xffffffffffffffff))
	}
	for i := range clientClaimPrefixes {
		f.Add(uint16(len(clientClaimHeaders)+i), uint64(0x5555))
	}
	f.Fuzz(func(t *testing.T, pick uint16, mask uint64) {
		all := append(append([]string{}, clientClaimHeaders...), clientClaimPrefixes...)
		name := all[int(pick)%len(all)]
		if strings.HasSuffix(name, "-") || name == "x-ms-client-principal" {
			name += "name" // a member of the prefix family
		}
		b := []byte(name)
		for i := range b {
			bit := mask>>(uint(i)%64)&1 == 1
			switch {
			case bit && b[i] >= 'a' && b[i] <= 'z':
				b[i] -= 'a' - 'A'
			case bit && b[i] == '-':
				b[i] = '_'
			}
		}
		if !isClientClaimHeader(string(b)) {
			t.Fatalf("%q (a spelling of %q) is not recognised", b, name)
		}
	})
}
