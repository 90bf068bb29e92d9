package rebinding_test

import (
	"testing"

	"github.com/olp-edu/borda/internal/rebinding"
)

func TestAddressedLocally(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:9091": true, "127.0.0.1": true, "[::1]:9091": true, "::1": true, "10.1.2.3:9091": true,
		"[::ffff:127.0.0.1]:9091": true, "localhost:9091": true, "LocalHost.:9091": true, "ops.localhost": true,
		"evil.example:9091": false, "evil.example": false, "localhost.evil.example:9091": false,
		"127.0.0.1.nip.io:9091": false, "0x7f000001:9091": false, "2130706433": false, "": false, "[evil.example]:1": false,
	} {
		if got := rebinding.AddressedLocally(host); got != want {
			t.Errorf("AddressedLocally(%q) = %v, want %v", host, got, want)
		}
	}
}
