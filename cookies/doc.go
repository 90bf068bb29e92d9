// Package cookies decides what the portal's auth cookies become on their
// way to an upstream and on their way back to the browser, and who the
// request is (a verified identity for user and escola rate limits).
//
// The request side (ApplyRequest) and the response side (ApplySetCookie)
// are pure functions over http.Header, called from the gateway's
// ReverseProxy Rewrite and ModifyResponse hooks. Malformed cookies never
// fail a request: what cannot be parsed is passed through untouched or,
// when it names an olp_* cookie the route does not forward, dropped.
//
// Identity (Verifier) verifies the JWT in Authorization: Bearer or in the
// olp_auth cookie with golang-jwt/jwt/v5 (HS256 from a shared secret, or
// RS256/ES256 from a JWKS document fetched and refreshed in the
// background by github.com/MicahParks/keyfunc/v3), so verification never
// costs a network call on the request path. An unverifiable token makes
// the request anonymous; it is never rejected here (the upstream is the
// authority on authentication).
package cookies
