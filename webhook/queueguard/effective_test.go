package queueguard

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// readInfo decodes a management API answer recorded from a RabbitMQ
// 3.10.8 node (GET /api/queues/{vhost}/{name}, testdata/).
func readInfo(t *testing.T, name string) QueueInfo {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var q QueueInfo
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return q
}

func info(typ, args, def string) QueueInfo {
	q := QueueInfo{Name: "q", Type: typ, EffectivePolicyDefinition: json.RawMessage(def)}
	if err := json.Unmarshal([]byte(args), &q.Arguments); err != nil {
		panic(err)
	}
	return q
}

// TestEffective: the effective overflow and limits as the broker resolves
// argument and policy (operator policy merged into
// effective_policy_definition) for each queue type.
func TestEffective(t *testing.T) {
	for _, c := range []struct {
		name      string
		q         QueueInfo
		overflow  string
		from      string
		maxLen    int64
		maxBytes  int64
		unguarded bool
	}{
		// Recorded from RabbitMQ 3.10.8 (the policies are named in each file).
		{"quorum, no policy", readInfo(t, "quorum_no_policy.json"), RejectPublish, "argument", -1, -1, false},
		{"quorum, policy max-length without overflow", readInfo(t, "quorum_policy_maxlength_only.json"), RejectPublish, "argument", 100, -1, false},
		{"quorum, policy max-length 2 + overflow drop-head: the policy wins", readInfo(t, "quorum_policy_drophead.json"), DropHead, "policy", 2, -1, true},
		{"quorum, policy + operator policy: the lower max-length", readInfo(t, "quorum_policy_drophead_operator_policy.json"), DropHead, "policy", 1, 100000, true},
		{"quorum, argument max-length 50, policy bytes, operator max-length 30", readInfo(t, "quorum_arg_maxlength_policy_bytes_operator_policy.json"), DropHead, "policy", 30, 4096, true},
		{"classic, policy drop-head: the argument wins", readInfo(t, "classic_policy_drophead.json"), RejectPublish, "argument", 2, -1, false},
		{"classic without x-overflow, policy drop-head", readInfo(t, "classic_noarg_policy_drophead.json"), DropHead, "policy", 100, -1, true},
		// Synthetic shapes.
		{"classic, argument limit, no overflow anywhere", info("classic", `{"x-max-length":5}`, `{}`), DropHead, "default", 5, -1, true},
		{"classic, argument max-length below the policy's", info("classic", `{"x-max-length":5,"x-overflow":"reject-publish"}`, `{"max-length":9,"overflow":"drop-head"}`), RejectPublish, "argument", 5, -1, false},
		{"quorum, argument max-length below the policy's", info("quorum", `{"x-max-length":5,"x-overflow":"reject-publish"}`, `{"max-length":9}`), RejectPublish, "argument", 5, -1, false},
		{"classic reject-publish-dlx refuses", info("classic", `{}`, `{"max-length":9,"overflow":"reject-publish-dlx"}`), RejectPublishDLX, "policy", 9, -1, false},
		{"quorum reject-publish-dlx is unsupported: drop-head", info("quorum", `{"x-overflow":"reject-publish"}`, `{"max-length":9,"overflow":"reject-publish-dlx"}`), DropHead, "policy", 9, -1, true},
		{"an empty proplist definition", info("quorum", `{"x-overflow":"reject-publish"}`, `[]`), RejectPublish, "argument", -1, -1, false},
		{"drop-head without a limit is harmless", info("quorum", `{"x-overflow":"reject-publish"}`, `{"overflow":"drop-head"}`), DropHead, "policy", -1, -1, false},
		{"max-length 0 is a limit", info("quorum", `{}`, `{"max-length":0}`), DropHead, "default", 0, -1, true},
		{"an unknown type reads as classic", info("", `{"x-overflow":"reject-publish"}`, `{"max-length":3,"overflow":"drop-head"}`), RejectPublish, "argument", 3, -1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Effective(c.q)
			if err != nil {
				t.Fatal(err)
			}
			if s.Overflow != c.overflow || s.OverflowFrom != c.from || s.MaxLength != c.maxLen || s.MaxLengthBytes != c.maxBytes || s.Unguarded() != c.unguarded {
				t.Errorf("Effective = %+v (unguarded %v), want overflow %s from %s, max-length %d, max-length-bytes %d, unguarded %v",
					s, s.Unguarded(), c.overflow, c.from, c.maxLen, c.maxBytes, c.unguarded)
			}
		})
	}
}

// TestEffectiveBeforeStatistics: a new queue's answer has no policy
// fields yet; its settings are not known (not "no policy").
func TestEffectiveBeforeStatistics(t *testing.T) {
	if _, err := Effective(readInfo(t, "quorum_no_stats_yet.json")); !errors.Is(err, ErrNoStatistics) {
		t.Fatalf("Effective = %v, want ErrNoStatistics", err)
	}
}
