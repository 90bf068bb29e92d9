package e2e

// Attacks on `borda consume-events` (docs/forwarder.md, "`borda
// consume-events`") through the real `borda serve` ingress.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/schema"
)

// startConsumeEvents runs `borda consume-events` on config with
// DATABASE_URL=dbURL until the test ends.
func startConsumeEvents(t *testing.T, config, dbURL string) *syncBuffer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "consume.yaml")
	config = strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(config)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd := exec.Command(borda(t), "consume-events", "--config", path, "--admin", freePort(t))
	cmd.Env = append(cleanEnv(), "DATABASE_URL="+dbURL)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("borda consume-events logs:\n%s", logs.String())
		}
	})
	return logs
}

// One accepted connection.update whose values PostgreSQL cannot store (a
// statusReason past its integer, a NUL in the instance name) was taken by
// consume-events for a database outage: it held the delivery for ever and
// every other instance's updates waited behind it (fresh attack pass
// A020). Now the unstorable reason is dropped (the state is kept), the
// unstorable name is acknowledged as malformed, and the genuine event
// sent after them is written.
func TestHostileConnectionUpdateTheDatabaseRefusesStallsEveryInstance(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	pool, dbURL := servicetest.IsolatedDatabase(t)
	if err := schema.Up(context.Background(), dbURL); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	n := newNames(t)
	p := startIngressServe(t, n, amqpURL, redisURL)
	startConsumeEvents(t, ingressHostileConfig(n, amqpURL, redisURL), dbURL)

	now := func() string { return time.Now().UTC().Format(time.RFC3339Nano) }
	tag := n.prefix[:len(n.prefix)-1]
	bodies := []string{
		fmt.Sprintf(`{"event":"connection.update","instance":"%s-bigreason","data":{"state":"open","statusReason":3000000000},"date_time":%q}`, tag, now()),
		fmt.Sprintf(`{"event":"connection.update","instance":"%s-nul\u0000x","data":{"state":"open"},"date_time":%q}`, tag, now()),
		fmt.Sprintf(`{"event":"CONNECTION_UPDATE","instance":"%s-victim","data":{"state":"close","statusReason":401},"date_time":%q}`, tag, now()),
	}
	for _, b := range bodies {
		if code, _, reply := ingressRaw(t, p.public, "/webhooks/whatsapp", b, "Authorization: Bearer "+ingressToken); code != 200 {
			t.Fatalf("POST %s: %d %s", b, code, reply)
		}
	}
	state := func(instance string) (string, *int) {
		var s string
		var r *int
		err := pool.QueryRow(context.Background(), `SELECT state, state_reason FROM whatsapp_instances WHERE instance = $1`, instance).Scan(&s, &r)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		return s, r
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s, _ := state(tag + "-victim"); s == "close" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the genuine connection.update sent after the poison was not written within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s, r := state(tag + "-bigreason"); s != "open" || r != nil {
		t.Errorf("the event with statusReason 3e9 stored %q reason %v, want open with no reason", s, r)
	}
}
