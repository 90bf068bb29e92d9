package gateway

import (
	"net/http"

	"github.com/rs/cors"
)

// defaultExposedHeaders are the response headers scripts may read when a
// policy names none: the rate-limit headers (legacy X-RateLimit-* and the
// IETF RateLimit fields) and the request id.
var defaultExposedHeaders = []string{
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
	"X-RateLimit-Would-Block", "RateLimit", "RateLimit-Policy",
	"Retry-After", "X-Request-Id",
}

// newCORS builds the rs/cors handler of a policy. Preflights (OPTIONS
// with Access-Control-Request-Method) are answered 204 at the edge, for
// allowed and refused origins alike, so they never reach the upstream nor
// the limiter; a refused origin gets no Access-Control-Allow-* header.
// An OPTIONS without Access-Control-Request-Method is not a preflight and
// is proxied like any request. Origin validation (exact origins with
// credentials) is the caller's (CORSPolicy).
func newCORS(p CORSPolicy) *cors.Cors {
	exposed := p.ExposedHeaders
	if len(exposed) == 0 {
		exposed = defaultExposedHeaders
	}
	methods := p.AllowedMethods
	if len(methods) == 0 {
		methods = []string{http.MethodGet, http.MethodPost, http.MethodHead}
	}
	maxAge := int(p.MaxAge.Seconds())
	return cors.New(cors.Options{
		AllowedOrigins:       p.AllowedOrigins,
		AllowedMethods:       methods,
		AllowedHeaders:       p.AllowedHeaders,
		ExposedHeaders:       exposed,
		AllowCredentials:     p.AllowCredentials,
		MaxAge:               maxAge,
		OptionsPassthrough:   false,
		OptionsSuccessStatus: http.StatusNoContent,
	})
}
