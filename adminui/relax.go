package adminui

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// relaxLabels are the relax form's labels by field, as the page shows a
// refused field.
var relaxLabels = map[string]string{"rule": "Rule", "factor": "Factor", "for": "For", "operator": "Your name", "reason": "Reason"}

// relax is POST /ui/relax: the Routes table's relax form. It is guarded
// as the replay is (ADMIN_TOKEN set, same origin, the token typed into the
// form), parsed and recorded by the RelaxSource as `borda limits relax`
// does, and answers 303 to the overview, which shows the relax in force
// (confirmed by a signed query: a crafted link shows nothing). A refusal
// is a problem page: 400 with each refused field, 403, or 503 when the
// relax could not be applied; never the overview.
func (p *Page) relax(w http.ResponseWriter, r *http.Request) {
	switch {
	case !p.gate.set:
		p.problemBack(w, http.StatusForbidden, "This page is read-only: ADMIN_TOKEN is not set on this gateway. Nothing was relaxed.", nil, overviewBack)
		return
	case !sameOrigin(r):
		p.log.Warn("relax refused: not sent from this page", "origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		p.problemBack(w, http.StatusForbidden, "Refused: the form was not sent from this page (Origin / Sec-Fetch-Site). Nothing was relaxed.", nil, overviewBack)
		return
	case p.src.Relaxer == nil:
		p.problemBack(w, http.StatusNotFound, "This gateway offers no relax from the page. Nothing was relaxed.", nil, overviewBack)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		p.problemBack(w, http.StatusBadRequest, "The form could not be read. Nothing was relaxed.", nil, overviewBack)
		return
	}
	if !p.gate.valid(r.PostForm.Get("token")) {
		p.log.Warn("relax refused: wrong operator token", "peer", r.RemoteAddr)
		p.problemBack(w, http.StatusForbidden, "Refused: the operator token is not ADMIN_TOKEN. Nothing was relaxed.", nil, overviewBack)
		return
	}
	if why := p.src.Relaxer.Unavailable(); why != "" {
		p.problemBack(w, http.StatusServiceUnavailable, "Relax is unavailable on this gateway: "+why+". Nothing was relaxed.", nil, overviewBack)
		return
	}
	req := RelaxRequest{Rule: r.PostForm.Get("rule"), Factor: r.PostForm.Get("factor"), For: r.PostForm.Get("for"),
		Operator: r.PostForm.Get("operator"), Reason: r.PostForm.Get("reason")}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*p.opts.Timeout)
	defer cancel()
	res, err := p.src.Relaxer.Relax(ctx, req)
	var bad *BadRelax
	switch {
	case errors.As(err, &bad):
		lines := make([]string, len(bad.Problems))
		for i, pr := range bad.Problems {
			label := relaxLabels[pr.Field]
			if label == "" {
				label = pr.Field
			}
			lines[i] = label + ": " + pr.Message
		}
		p.problemBack(w, http.StatusBadRequest, "The relax was refused; nothing changed:", lines, overviewBack)
		return
	case err != nil:
		p.log.Error("relaxing a rule from the operator page", "rule", req.Rule, "operator", strings.TrimSpace(req.Operator), "err", err)
		p.problemBack(w, http.StatusServiceUnavailable, "The relax was not applied, so no relax is in force: "+err.Error(), nil, overviewBack)
		return
	}
	p.log.Info("rule relaxed from the operator page", "rule", res.Rule, "factor", res.Factor, "until", res.Until.UTC().Format(time.RFC3339),
		"operator", strings.TrimSpace(req.Operator), "reason", strings.TrimSpace(req.Reason), "audit_id", res.AuditID)
	q := relaxedQuery(res)
	q.Set("sig", p.sign(relaxedParts(q)...))
	http.Redirect(w, r, "/ui?"+q.Encode()+"#routes", http.StatusSeeOther)
}

// relaxedQuery is the confirmation a successful relax redirects with.
func relaxedQuery(res RelaxResult) url.Values {
	q := url.Values{}
	q.Set("relaxed", res.Rule)
	q.Set("factor", strconv.FormatFloat(res.Factor, 'g', -1, 64))
	q.Set("until", strconv.FormatInt(res.Until.Unix(), 10))
	q.Set("audit", strconv.FormatInt(res.AuditID, 10))
	if res.Warning != "" {
		q.Set("warning", res.Warning)
	}
	return q
}

// relaxedParts are the signed parts of a relax confirmation.
func relaxedParts(q url.Values) []string {
	return []string{"relax", q.Get("relaxed"), q.Get("factor"), q.Get("until"), q.Get("audit"), q.Get("warning")}
}

// relaxedFlash is the overview's confirmation of a relax.
type relaxedFlash struct {
	Rule    string
	Factor  float64
	Until   time.Time
	AuditID string
	Warning string
	Ended   bool
	// Rule is found in the Routes table: InForce, Limit, Window and Scope
	// are its limit in force, base limit, window and scope.
	Found         bool
	InForce, Base int64
	Window        time.Duration
	Scope         string
}

// relaxed reads the overview's query: the relax this process confirmed
// (nil for none, or for a query it did not sign).
func (p *Page) relaxed(q url.Values, routes []Route, now time.Time) *relaxedFlash {
	if q.Get("relaxed") == "" || !p.signed(q.Get("sig"), relaxedParts(q)...) {
		return nil
	}
	f, err1 := strconv.ParseFloat(q.Get("factor"), 64)
	until, err2 := strconv.ParseInt(q.Get("until"), 10, 64)
	if err1 != nil || err2 != nil {
		return nil
	}
	fl := &relaxedFlash{Rule: q.Get("relaxed"), Factor: f, Until: time.Unix(until, 0), AuditID: q.Get("audit"), Warning: q.Get("warning")}
	fl.Ended = !now.Before(fl.Until)
	for _, rt := range routes {
		for _, ru := range rt.Rules {
			if ru.Name == fl.Rule && !fl.Found {
				fl.Found, fl.Base, fl.Window, fl.Scope = true, ru.Limit, ru.Window, ru.Scope
				fl.InForce = inForce(ru.Limit, f)
			}
		}
	}
	return fl
}

// inForce is limit relaxed by factor as the limiter applies it:
// floor(limit × factor), never below limit.
func inForce(limit int64, factor float64) int64 {
	return max(limit, int64(math.Floor(float64(limit)*factor)))
}
