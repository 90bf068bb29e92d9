package e2e

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeTakesListenFlagsAndVariables: the real `borda serve` listens
// where --listen/--admin-listen say (over the file), or where
// BORDA_LISTEN/BORDA_ADMIN_LISTEN say when no flag is given; `config
// check` prints the variables' addresses as the effective listen keys.
func TestServeTakesListenFlagsAndVariables(t *testing.T) {
	path := secretsWriteConfig(t, "environment: development\nlisten: \"127.0.0.1:1\"\nadmin_listen: \"127.0.0.1:2\"\nroutes:\n  - {name: a, upstream: \"http://127.0.0.1:1\"}\n")
	for _, how := range []string{"flags", "variables"} {
		t.Run(how, func(t *testing.T) {
			pub, adm := freePort(t), freePort(t)
			args := []string{"serve", "--config", path}
			env := cleanEnv()
			if how == "flags" {
				args = append(args, "--listen", pub, "--admin-listen", adm)
				env = append(env, "BORDA_LISTEN=127.0.0.1:3", "BORDA_ADMIN_LISTEN=127.0.0.1:4") // the flags win
			} else {
				env = append(env, "BORDA_LISTEN="+pub, "BORDA_ADMIN_LISTEN="+adm)
				out, code := secretsRun(t, env, "config", "check", "--config", path)
				if code != 0 || !strings.Contains(out, "\nlisten: "+pub+"\n") || !strings.Contains(out, "\nadmin_listen: "+adm+"\n") {
					t.Errorf("config check with BORDA_LISTEN: exit %d:\n%s", code, out)
				}
			}
			cmd := exec.Command(borda(t), args...)
			cmd.Env = env
			logs := &syncBuffer{}
			cmd.Stdout, cmd.Stderr = logs, logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			t.Cleanup(func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					_ = cmd.Process.Kill() // only the process this test started
					<-done
				}
				if t.Failed() {
					t.Logf("borda serve logs:\n%s", logs.String())
				}
			})
			for _, addr := range []string{pub, adm} {
				eventually(t, 30*time.Second, "/healthz on "+addr, func() bool {
					resp, err := http.Get("http://" + addr + "/healthz")
					if err != nil {
						return false
					}
					resp.Body.Close()
					return resp.StatusCode == 200
				})
			}
		})
	}
}

// TestServeOnABusyPortSaysItCannotListen: with its address taken, `borda
// serve` logged `"msg":"listening"` at error level and exited 1, a line
// that reads as if it listened. It now says it cannot listen, which
// listener and where its address came from, and exits 1; for the admin
// listener too.
func TestServeOnABusyPortSaysItCannotListen(t *testing.T) {
	path := secretsWriteConfig(t, "environment: development\nroutes:\n  - {name: a, upstream: \"http://127.0.0.1:1\"}\n")
	busy := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(busy.Close)
	taken := strings.TrimPrefix(busy.URL, "http://")
	for _, tc := range []struct{ name, listen, admin, want string }{
		{"public", taken, freePort(t), `"listener":"public listener (--listen, BORDA_LISTEN, listen)"`},
		{"admin", freePort(t), taken, `"listener":"admin listener (--admin-listen, BORDA_ADMIN_LISTEN, admin_listen)"`},
	} {
		out, code := secretsRun(t, cleanEnv(), "serve", "--config", path, "--listen", tc.listen, "--admin-listen", tc.admin)
		if code != 1 || !strings.Contains(out, `"msg":"cannot listen, so borda serve exits"`) || !strings.Contains(out, tc.want) ||
			!strings.Contains(out, "address already in use") {
			t.Errorf("%s address taken: exit %d, want 1 and a line saying it cannot listen (%s):\n%s", tc.name, code, tc.want, out)
		}
	}
}
