package ingress

import (
	"errors"
	"net/http"
	"strings"
)

// ReasonNotConfigured is the 503 reason while the ingress cannot run
// because its configuration is unusable (no credential configured).
const ReasonNotConfigured = "NOT_CONFIGURED"

// Unconfigured stands in for an Ingress that could not be built, so that a
// configuration mistake in the webhook section never takes the portal's
// proxy down and never loses an event: it answers every request under the
// webhook paths 503 {"status":"SERVICE_UNAVAILABLE","reason":"NOT_CONFIGURED"}
// (providers retry a 503; they drop an event for good on 401), and
// readiness of the "webhook" component reports Err.
type Unconfigured struct {
	// Err is why the ingress could not be built.
	Err   error
	paths []string
}

// NewUnconfigured returns the stand-in serving paths (the webhook path
// prefixes the configuration names), failing with err.
func NewUnconfigured(paths []string, err error) *Unconfigured {
	return &Unconfigured{Err: err, paths: paths}
}

// Paths returns the webhook path prefixes to mount.
func (u *Unconfigured) Paths() []string { return u.paths }

// ServeHTTP answers 503 NOT_CONFIGURED.
func (u *Unconfigured) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		respond(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "")
		return
	}
	w.Header().Set("Retry-After", "60")
	respond(w, http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", ReasonNotConfigured)
}

// RedactPath replaces the token of the path form ({path}/t/{token}) with
// "[redacted]", as Ingress.RedactPath does.
func (u *Unconfigured) RedactPath(p string) string {
	for _, base := range u.paths {
		if rest, ok := strings.CutPrefix(p, base); ok && (rest == "" || rest[0] == '/') {
			return redactPathToken(base, rest)
		}
	}
	return p
}

// Ready returns Err: the component is never ready.
func (u *Unconfigured) Ready() error {
	return errors.New("webhook ingress not configured: " + strings.TrimSpace(u.Err.Error()))
}
