package ingress

import (
	"encoding/json"
	"testing"
)

// Distinct field tuples never join to one id (fresh attack pass B12:
// ("a:b","c") and ("a","b:c") were one event to the dedup), and a tuple
// without ':' or '%' joins as it always did.
func TestFieldsIDOfDistinctTuplesNeverMeet(t *testing.T) {
	fields := [][]string{{"instance"}, {"event"}, {"data", "key", "id"}}
	pieces := []string{"a", "b", "a:b", "b:c", ":", "%", "%3A", "a%3Ab", "c"}
	seen := map[string][3]string{}
	for _, x := range pieces {
		for _, y := range pieces {
			for _, z := range pieces {
				body, _ := json.Marshal(map[string]any{"instance": x, "event": y, "data": map[string]any{"key": map[string]any{"id": z}}})
				id, ok := fieldsID(body, fields)
				if !ok {
					t.Fatalf("no id for %s", body)
				}
				tuple := [3]string{x, y, z}
				if prev, dup := seen[id]; dup && prev != tuple {
					t.Fatalf("tuples %q and %q share the id %q", prev, tuple, id)
				}
				seen[id] = tuple
			}
		}
	}
	body := []byte(`{"instance":"inst-1","event":"messages.upsert","data":{"key":{"id":"ABC"}}}`)
	if id, _ := fieldsID(body, fields); id != "inst-1:messages.upsert:ABC" {
		t.Errorf("a plain tuple joins as %q, want inst-1:messages.upsert:ABC as before", id)
	}
}
