package ingress

import (
	"net/http"
	"testing"

	"github.com/olp-edu/borda/webhook/envelope"
)

// TestNestedSourcePathsRouteToTheLongest: a source whose path lies under
// another's takes its own requests, whatever order the sources are
// configured in; the parent keeps the rest.
func TestNestedSourcePathsRouteToTheLongest(t *testing.T) {
	parent := Source{Name: "parent", Path: "/webhooks/a", RoutingKey: defaultRoutingKey, Tokens: []string{"parent-token"}, IDFields: defaultIDFields}
	child := Source{Name: "child", Path: "/webhooks/a/b", RoutingKey: defaultRoutingKey, Tokens: []string{"child-token"}, IDFields: defaultIDFields}
	for _, order := range [][]Source{{parent, child}, {child, parent}} {
		o := defaultOptions()
		o.Sources = order
		pub := &fakePublisher{}
		i, _ := newUnitIngress(t, o, pub)
		expect(t, req{target: "/webhooks/a/b/messages-upsert", body: `{"n":1}`, headers: bearer("child-token")}.do(i), http.StatusOK, StatusPublishedConfirmed)
		expect(t, req{target: "/webhooks/a/c", body: `{"n":2}`, headers: bearer("parent-token")}.do(i), http.StatusOK, StatusPublishedConfirmed)
		var sources []string
		for _, m := range pub.messages() {
			env, err := envelope.Decode(m.Body)
			if err != nil {
				t.Fatal(err)
			}
			sources = append(sources, env.Source)
		}
		if len(sources) != 2 || sources[0] != "child" || sources[1] != "parent" {
			t.Errorf("configured %s then %s: events from sources %v, want [child parent]", order[0].Name, order[1].Name, sources)
		}
	}
}
