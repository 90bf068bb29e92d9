// Package rebinding tells a request addressed to a local listener by
// address from one addressed by a DNS name, the mark of a DNS-rebinding
// page (evil.example resolving to 127.0.0.1) reaching a loopback-only
// endpoint from the operator's own browser (docs/operations.md, "Who can
// open the page"). The loopback check on the TCP peer cannot tell them
// apart: the browser's connection comes from loopback either way.
package rebinding

import (
	"net"
	"net/netip"
	"strings"
)

// AddressedLocally reports whether host (a Host header, with or without
// port) is an IP literal, localhost or a name under .localhost (RFC 6761:
// always loopback, never resolved by DNS). Any other name, and an empty
// Host, is false.
func AddressedLocally(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}
