// Package cookies decides what the portal's auth cookies become on their
// way to an upstream and on their way back to the browser, and which
// credential (Credential) the upstream will see, the one package identity
// verifies.
//
// The request side (ApplyRequest) and the response side (ApplySetCookie)
// are pure functions over http.Header, called from the gateway's
// ReverseProxy Rewrite and ModifyResponse hooks. Malformed cookies never
// fail a request: what cannot be parsed is passed through untouched or,
// when it names an olp_* cookie the route does not forward, dropped.
package cookies
