package restconn_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/internal/upstashtest"
)

// rig is a REST client (built as production builds it) through the
// Upstash test server in front of the test Redis, and a RESP client of
// that Redis to set up and check what the REST client cannot write.
type rig struct {
	rest   redis.UniversalClient
	resp   redis.UniversalClient
	front  *upstashtest.Server
	prefix string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	url := servicetest.RedisURL(t)
	front, restURL := servicetest.RESTFront(t, url)
	r := &rig{rest: servicetest.RESTClient(t, restURL), resp: servicetest.RedisClient(t, url, false), front: front, prefix: servicetest.KeyPrefix(t)}
	t.Cleanup(func() {
		ctx := context.Background()
		iter := r.resp.Scan(ctx, 0, r.prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			r.resp.Del(ctx, iter.Val())
		}
	})
	return r
}

// measure returns what fn sent the REST server: requests and commands.
func (r *rig) measure(fn func()) upstashtest.Stats {
	before := r.front.Stats()
	fn()
	after := r.front.Stats()
	for k, v := range before.Requests {
		after.Requests[k] -= v
	}
	for k, v := range before.Commands {
		after.Commands[k] -= v
	}
	return after
}

// A new client sends nothing but its commands: no HELLO, no CLIENT
// SETINFO (Protocol 2, DisableIdentity), so one PING is one request of
// one command.
func TestAFreshClientSendsOnlyItsCommand(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	st := r.measure(func() {
		if err := r.rest.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	})
	if st.TotalRequests() != 1 || st.Requests["/"] != 1 || st.TotalCommands() != 1 {
		t.Fatalf("one PING on a fresh client sent %v requests, %v commands; want one POST / of one command", st.Requests, st.Commands)
	}
}

// The commands Borda's components use behave as on RESP: SET NX PX
// (the aggregation lock), GET of a missing key (redis.Nil), MGET with a
// hole, SCAN with MATCH and COUNT over several pages, INCRBY, PTTL, DEL.
func TestCommandsBehaveAsOnRESP(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	lock := r.prefix + "lock"
	if ok, err := r.rest.SetNX(ctx, lock, "a", 5*time.Second).Result(); !ok || err != nil {
		t.Fatalf("SET NX on a free key = %v, %v", ok, err)
	}
	if ok, err := r.rest.SetNX(ctx, lock, "b", 5*time.Second).Result(); ok || err != nil {
		t.Fatalf("SET NX on a held key = %v, %v; want false", ok, err)
	}
	if pttl := r.resp.PTTL(ctx, lock).Val(); pttl <= 0 || pttl > 5*time.Second {
		t.Fatalf("PTTL after SET NX PX 5000 = %s", pttl)
	}
	if _, err := r.rest.Get(ctx, r.prefix+"missing").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET of a missing key: err %v, want redis.Nil", err)
	}
	for i := range 25 {
		k := fmt.Sprintf("%sc:%02d", r.prefix, i)
		r.resp.Set(ctx, k, 0, time.Minute) // INCRBY keeps the TTL: no key outlives a killed run
		if err := r.rest.IncrBy(ctx, k, int64(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	vals, err := r.rest.MGet(ctx, r.prefix+"c:03", r.prefix+"nothing", r.prefix+"c:24").Result()
	if err != nil || len(vals) != 3 || vals[0] != "3" || vals[1] != nil || vals[2] != "24" {
		t.Fatalf("MGET = %#v, %v; want [3 nil 24]", vals, err)
	}
	var keys []string
	pages := 0
	var cursor uint64
	for {
		page, next, err := r.rest.Scan(ctx, cursor, r.prefix+"c:*", 5).Result()
		if err != nil {
			t.Fatal(err)
		}
		keys, cursor, pages = append(keys, page...), next, pages+1
		if cursor == 0 {
			break
		}
	}
	if len(keys) != 25 || pages < 2 {
		t.Fatalf("SCAN MATCH COUNT 5 found %d keys in %d pages; want 25 in several", len(keys), pages)
	}
	if n, err := r.rest.Del(ctx, keys...).Result(); n != 25 || err != nil {
		t.Fatalf("DEL = %d, %v", n, err)
	}
}

// Values are bytes: a value that is not UTF-8 (written over RESP) reads
// back whole over REST (Upstash-Encoding: base64), and an argument that
// is not UTF-8 is refused before any request (JSON would alter it), so
// nothing is ever written altered.
func TestBinaryValuesSurviveAndBinaryArgumentsAreRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	key := r.prefix + "bin"
	if err := r.resp.Set(ctx, key, all, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := r.rest.Get(ctx, key).Bytes()
	if err != nil || string(got) != string(all) {
		t.Fatalf("GET of 256 bytes over REST = %q, %v", got, err)
	}
	// A value that happens to read as base64, "OK", an empty string: the
	// reply is decoded once, never twice.
	for _, v := range []string{"T0s=", "OK", "", "PONG", "dGV4dA=="} {
		if err := r.resp.Set(ctx, key, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if got := r.rest.Get(ctx, key).Val(); got != v {
			t.Errorf("GET of %q over REST = %q", v, got)
		}
	}
	st := r.measure(func() {
		err = r.rest.Set(ctx, key, []byte{0xff, 0xfe}, time.Minute).Err()
	})
	if err == nil || !strings.Contains(err.Error(), "not valid UTF-8") || st.TotalRequests() != 0 {
		t.Fatalf("SET of a non-UTF-8 value: err %v after %d requests; want a refusal naming UTF-8 and no request", err, st.TotalRequests())
	}
}

// A go-redis Pipeline is one POST /pipeline, whatever its length, and a
// command that fails fails alone (Upstash answers each command).
func TestAPipelineIsOneRequestAndFailsPerCommand(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	r.resp.Set(ctx, r.prefix+"text", "abc", time.Minute)
	r.resp.Set(ctx, r.prefix+"n", 0, time.Minute) // INCRBY keeps the TTL: no key outlives a killed run
	var incr, bad, get *redis.IntCmd
	var s *redis.StringCmd
	st := r.measure(func() {
		p := r.rest.Pipeline()
		incr = p.IncrBy(ctx, r.prefix+"n", 5)
		bad = p.Incr(ctx, r.prefix+"text")
		get = p.Exists(ctx, r.prefix+"n")
		s = p.Get(ctx, r.prefix+"text")
		for i := range 96 {
			p.Expire(ctx, fmt.Sprintf("%sx%d", r.prefix, i), time.Minute)
		}
		_, _ = p.Exec(ctx)
	})
	if st.TotalRequests() != 1 || st.Requests["/pipeline"] != 1 || st.Commands["/pipeline"] != 100 {
		t.Fatalf("a pipeline of 100 commands sent %v requests, %v commands; want one /pipeline of 100", st.Requests, st.Commands)
	}
	if incr.Val() != 5 || get.Val() != 1 || s.Val() != "abc" {
		t.Errorf("pipeline replies: INCRBY %d, EXISTS %d, GET %q", incr.Val(), get.Val(), s.Val())
	}
	if err := bad.Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR value is not an integer") {
		t.Errorf("INCR of text in a pipeline: %v; want Redis's own error", err)
	}
}

// A go-redis TxPipeline (MULTI … EXEC) is one POST /multi-exec, atomic:
// the telemetry flush (INCRBY + EXPIRE per counter) is one request. A
// command that fails at run time fails alone, as in Redis; a transaction
// Redis refuses whole (a command it cannot queue) fails whole and
// changes nothing.
func TestATransactionIsOneMultiExecRequest(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	var cmds []redis.Cmder
	var err error
	st := r.measure(func() {
		cmds, err = r.rest.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for i := range 50 {
				k := fmt.Sprintf("%sm%d", r.prefix, i)
				p.IncrBy(ctx, k, int64(i+1))
				p.Expire(ctx, k, 2*time.Hour)
			}
			return nil
		})
	})
	if err != nil || len(cmds) != 100 {
		t.Fatalf("TxPipelined: %d replies, %v", len(cmds), err)
	}
	if st.TotalRequests() != 1 || st.Requests["/multi-exec"] != 1 || st.Commands["/multi-exec"] != 100 {
		t.Fatalf("a transaction of 100 commands sent %v requests, %v commands; want one /multi-exec of 100", st.Requests, st.Commands)
	}
	if v, ttl := r.resp.Get(ctx, r.prefix+"m49").Val(), r.resp.TTL(ctx, r.prefix+"m49").Val(); v != "50" || ttl <= time.Hour {
		t.Fatalf("after the transaction m49 = %q (TTL %s), want 50 with a 2 h TTL", v, ttl)
	}

	r.resp.Set(ctx, r.prefix+"text", "abc", time.Minute)
	cmds, err = r.rest.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, r.prefix+"text")
		p.Set(ctx, r.prefix+"ran", "1", time.Minute)
		return nil
	})
	if err == nil || cmds[0].Err() == nil || cmds[1].Err() != nil || r.resp.Get(ctx, r.prefix+"ran").Val() != "1" {
		t.Fatalf("a run-time failure in a transaction: err %v, replies %v; want INCR failed alone and SET done", err, cmds)
	}

	_, err = r.rest.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, r.prefix+"never", "1", time.Minute)
		p.Do(ctx, "INCR") // wrong arity: Redis refuses to queue it
		return nil
	})
	if err == nil || r.resp.Exists(ctx, r.prefix+"never").Val() != 0 {
		t.Fatalf("a transaction Redis refused whole: err %v, SET applied %d; want an error and nothing applied", err, r.resp.Exists(ctx, r.prefix+"never").Val())
	}
}

// Scripts: go-redis's Script.Run sends EVALSHA, and on NOSCRIPT (a script
// the server has not cached) EVAL once; later runs are EVALSHA alone.
// Tables come back as arrays, false as nil, errors raised by the script
// as errors.
func TestScriptsRunByDigestAndFallBackOnNOSCRIPT(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	script := redis.NewScript(`-- ` + hex.EncodeToString(nonce) + `
redis.call('SET', KEYS[1], ARGV[1], 'PX', 60000)
return {redis.call('GET', KEYS[1]), tonumber(ARGV[2]) * 2, false, {'nested', 7}}`)
	for i, want := range []int{2, 1} {
		var res []any
		var err error
		st := r.measure(func() { res, err = script.Run(ctx, r.rest, []string{r.prefix + "s"}, "v", 21).Slice() })
		if err != nil {
			t.Fatal(err)
		}
		if st.Requests["/"] != want {
			t.Errorf("run %d sent %d requests, want %d (EVALSHA, then EVAL only when NOSCRIPT)", i+1, st.Requests["/"], want)
		}
		if fmt.Sprint(res) != "[v 42 <nil> [nested 7]]" {
			t.Errorf("script reply %#v", res)
		}
	}
	err := redis.NewScript(`return redis.error_reply('BORDA nope')`).Run(ctx, r.rest, nil).Err()
	if err == nil || err.Error() != "BORDA nope" {
		t.Errorf("a script's error reply = %v, want BORDA nope", err)
	}
}

// What REST cannot carry is refused with an error naming the command and
// the way out, before any request, and the connection stays usable.
func TestWhatRESTCannotDoIsRefusedByName(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	cases := map[string]func() error{
		"BLPOP": func() error { return r.rest.BLPop(ctx, time.Second, r.prefix+"q").Err() },
		"XREAD": func() error {
			return r.rest.XRead(ctx, &redis.XReadArgs{Streams: []string{r.prefix + "s", "0"}, Block: time.Second}).Err()
		},
		"WAIT":      func() error { return r.rest.Do(ctx, "WAIT", 1, 1000).Err() },
		"SELECT":    func() error { return r.rest.Do(ctx, "SELECT", 1).Err() },
		"CLIENT":    func() error { return r.rest.ClientID(ctx).Err() },
		"SUBSCRIBE": func() error { _, err := r.rest.Subscribe(ctx, r.prefix+"ch").Receive(ctx); return err },
		"WATCH": func() error {
			return r.rest.Watch(ctx, func(*redis.Tx) error { return nil }, r.prefix+"w")
		},
	}
	for name, run := range cases {
		var err error
		st := r.measure(func() { err = run() })
		if err == nil || !strings.Contains(err.Error(), "restconn: "+name) || !strings.Contains(err.Error(), "rediss://") {
			t.Errorf("%s over REST: %v; want a refusal naming it and the rediss:// way", name, err)
		}
		if st.TotalRequests() != 0 {
			t.Errorf("%s over REST sent %d requests, want none", name, st.TotalRequests())
		}
	}
	if err := r.rest.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after the refusals: %v", err)
	}
}

// A wrong token is a Redis error naming HTTP 401 (never the token).
func TestAWrongTokenIsAnErrorNaming401(t *testing.T) {
	t.Parallel()
	_, restURL := servicetest.RESTFront(t, servicetest.RedisURL(t))
	c := servicetest.RESTClientWith(t, restURL, "not-the-token", servicetest.RESTReadTimeout)
	err := c.Ping(context.Background()).Err()
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || strings.Contains(err.Error(), "not-the-token") {
		t.Fatalf("PING with a wrong token: %v; want an error naming HTTP 401 and not the token", err)
	}
}

// Read-your-writes: the Upstash-Sync-Token of a reply travels with the
// next request, so a global database's replica serves it only once it
// has the writes before.
func TestTheSyncTokenOfAReplyIsSentBack(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	for range 3 {
		if err := r.rest.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.front.Stats().SyncTokens; n < 2 {
		t.Fatalf("%d requests sent a sync token back, want 2 of 3 (all but the first)", n)
	}
}

// An endpoint that answers a redirect fails the command with the host it
// pointed to; the token and the commands never reach the target (Go's
// default client resends a 307/308 POST, and its Authorization to the
// same host).
func TestARedirectingEndpointIsNeverFollowed(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer target.Close()
	for _, code := range []int{301, 307, 308} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/", code)
		}))
		c := servicetest.RESTClientWith(t, srv.URL, "tok3n", servicetest.RESTReadTimeout)
		err := c.Ping(context.Background()).Err()
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "redirect") || strings.Contains(err.Error(), "tok3n") {
			t.Fatalf("a %d: PING = %v; want a redirect error without the token", code, err)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect's target was called %d times", n)
	}
}
