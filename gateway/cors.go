package gateway

import (
	"net/http"

	"github.com/rs/cors"
)

// newCORS builds the rs/cors handler of a policy. Preflights (OPTIONS
// with Access-Control-Request-Method) are answered 204 at the edge, for
// allowed and refused origins alike, so they never reach the upstream nor
// the limiter; a refused origin gets no Access-Control-Allow-* header.
// An OPTIONS without Access-Control-Request-Method is not a preflight and
// is proxied like any request. Origin validation (exact origins with
// credentials) is the caller's (CORSPolicy).
func newCORS(p CORSPolicy) *cors.Cors {
	maxAge := int(p.MaxAge.Seconds())
	return cors.New(cors.Options{
		AllowedOrigins:       p.AllowedOrigins,
		AllowedMethods:       p.AllowedMethods,
		AllowedHeaders:       p.AllowedHeaders,
		ExposedHeaders:       p.ExposedHeaders,
		AllowCredentials:     p.AllowCredentials,
		MaxAge:               maxAge,
		OptionsPassthrough:   false,
		OptionsSuccessStatus: http.StatusNoContent,
	})
}
