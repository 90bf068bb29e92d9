package ingress

import (
	"errors"
	"net/http"
	"slices"
	"sort"
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
	// sorted are paths longest first, bases their segments (RedactPath).
	sorted []string
	bases  [][]string
}

// NewUnconfigured returns the stand-in serving paths (the webhook path
// prefixes the configuration names), failing with err.
func NewUnconfigured(paths []string, err error) *Unconfigured {
	u := &Unconfigured{Err: err, paths: paths}
	u.sorted = slices.Clone(paths)
	sort.SliceStable(u.sorted, func(i, j int) bool { return len(u.sorted[i]) > len(u.sorted[j]) })
	for _, p := range u.sorted {
		u.bases = append(u.bases, baseSegments(p))
	}
	return u
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

// RedactPath redacts the path form's token as Ingress.RedactPath does.
func (u *Unconfigured) RedactPath(p string) string {
	return redactTokenPath(p, u.bases, u.sorted, maxEventName)
}

// Ready returns Err: the component is never ready.
func (u *Unconfigured) Ready() error {
	return errors.New("webhook ingress not configured: " + strings.TrimSpace(u.Err.Error()))
}
