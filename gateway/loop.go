package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
)

// A route whose upstream leads back to the gateway (its own listener, a
// load balancer or DNS name in front of it) made one request into an
// endless chain of requests, each holding a connection and a goroutine
// until file descriptors ran out. Every proxied request carries
// "Via: 1.1 borda-<64 random bits>" (RFC 9110 §7.6.3, which names loop
// detection as Via's purpose), and a request whose Via already holds
// this process's pseudonym is answered 508 Loop Detected before it is
// proxied again (docs/edge.md, "Forwarded headers"). The pseudonym is
// random per process, so a client cannot aim it at anyone but itself,
// and a chain of distinct gateways (borda behind borda) still passes.

// newViaPseudonym returns "borda-" and 16 random hex digits.
func newViaPseudonym() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "borda-" + hex.EncodeToString(b[:])
}

// viaVersion is the received-protocol of the Via entry for in: "1.1",
// "2" (RFC 9110 §7.6.3 omits the "HTTP/" name).
func viaVersion(in *http.Request) string {
	if in.ProtoMajor >= 2 {
		return strconv.Itoa(in.ProtoMajor)
	}
	return strconv.Itoa(in.ProtoMajor) + "." + strconv.Itoa(in.ProtoMinor)
}

// viaEntry is this process's Via entry for in: "1.1 borda-…" for
// HTTP/1.1 without an allocation (viaEntry11, built once in New), else
// built from viaVersion.
func (s *Server) viaEntry(in *http.Request) string {
	if in.ProtoMajor == 1 && in.ProtoMinor == 1 && s.viaEntry11 != "" {
		return s.viaEntry11
	}
	return viaVersion(in) + " " + s.via
}

// looped reports whether a Via line of h names this process.
func (s *Server) looped(h http.Header) bool {
	for _, line := range h["Via"] {
		if strings.Contains(line, s.via) {
			return true
		}
	}
	return false
}

// addResponseVia appends this process's Via entry to an upstream's
// response (RFC 9110 §7.6.3 asks it of every forwarded message, responses
// included), with the protocol the response came in: "1.1 borda-…",
// "2 borda-…" from an HTTP/2 upstream. The upstream's own Via lines stay
// before it.
func (s *Server) addResponseVia(res *http.Response) {
	entry := s.viaEntry11
	if res.ProtoMajor != 1 || res.ProtoMinor != 1 || entry == "" {
		entry = viaVersion(&http.Request{ProtoMajor: res.ProtoMajor, ProtoMinor: res.ProtoMinor}) + " " + s.via
	}
	res.Header["Via"] = append(res.Header["Via"], entry)
}
