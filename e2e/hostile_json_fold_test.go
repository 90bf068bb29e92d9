package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
)

// Fresh attack pass A34: encoding/json (consume-events, every Go reader)
// matches member names to struct fields case-insensitively under Unicode
// simple folding and keeps the last, while PHP, Python and JavaScript
// read names exactly. A body naming "instance" and "Instance", "state" and
// "ſtate" (U+017F), "event" and "EVENT", or "key" and "\u212aey" (the
// Kelvin sign) was 200 and read as two different events. The ingress now
// refuses every such body 400 DUPLICATE_MEMBER, at any depth and in any
// escape spelling; names that differ in another way still pass.
func TestHostileIngressCaseFoldedDuplicateMembersAreRefused(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	p := startIngressServe(t, newNames(t), amqpURL, redisURL)
	now := time.Now().UTC().Format(time.RFC3339)
	folded := []string{
		`{"event":"connection.update","instance":"legit-inst","Instance":"victim-inst","data":{"state":"open","State":"close"},"date_time":"%s","id":"%d"}`,
		`{"event":"messages.upsert","EVENT":"connection.update","instance":"kelvin-inst","data":{"key":{"id":"k1"},"\u017ftate":"close","state":"open"},"date_time":"%s","id":"%d"}`,
		`{"event":"connection.update","instance":"i","data":{"state":"open","ſtate":"close"},"date_time":"%s","id":"%d"}`,
		`{"event":"connection.update","instance":"i","INSTANCE":"j","date_time":"%s","id":"%d"}`,
		`{"data":{"key":{"id":"k1","\u212aey":"x","key":"y"}},"date_time":"%s","id":"%d"}`,
		`{"Date_Time":"x","date_time":"%s","id":"%d"}`,
		`{"date_time":"%s","id":"%d","ID":"other"}`,
	}
	for k, f := range folded {
		body := fmt.Sprintf(f, now, k)
		code, _, reply := ingressRaw(t, p.public, "/webhooks/whatsapp", body, "Authorization: Bearer "+ingressToken)
		if code != 400 || !strings.Contains(reply, `"DUPLICATE_MEMBER"`) {
			t.Errorf("%s: %d %s, want 400 DUPLICATE_MEMBER", body, code, reply)
		}
	}
	// Control: names that no reader folds together (dotless ı, ß and ss)
	// and the same name in different objects are one reading: accepted.
	for k, f := range []string{
		`{"event":"connection.update","instance":"i","data":{"instance":"i","state":"open"},"date_time":"%s","id":"fold-ok-%d"}`,
		`{"i":1,"ı":2,"ss":3,"ß":4,"date_time":"%s","id":"fold-ok-%d"}`,
	} {
		body := fmt.Sprintf(f, now, k)
		if code, _, reply := ingressRaw(t, p.public, "/webhooks/whatsapp", body, "Authorization: Bearer "+ingressToken); code != 200 {
			t.Errorf("%s: %d %s, want 200", body, code, reply)
		}
	}
}
