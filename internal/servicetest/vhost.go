package servicetest

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// Vhost is a RabbitMQ virtual host of one test's own on the shared
// broker, with a user of its own: policies and permissions set on it
// (through its methods, always with -p) touch no other test and no other
// client of the broker.
type Vhost struct {
	t    testing.TB
	user string
	Name string
	// URL is the test's AMQP URL (AMQPURL) with this vhost as its path:
	// the admin's, every permission on the vhost.
	URL string
	// UserURL is URL with the vhost's own user (named like the vhost),
	// whose permissions SetPermissions changes: the process under test
	// connects with it, the admin keeps URL.
	UserURL string
}

// NewVhost adds a vhost named after the test (servicetest.Name), grants
// the URL's user every permission on it, and deletes it (with every queue,
// exchange and policy in it) when the test ends. It needs rabbitmqctl on
// the test host (the broker of BORDA_TEST_AMQP_URL must be the local
// node); it skips otherwise (fails under BORDA_REQUIRE_SERVICES=1).
func NewVhost(t testing.TB) *Vhost {
	t.Helper()
	base := AMQPURL(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parsing the AMQP URL: %v", err)
	}
	name := Name(t)
	if _, err := Rabbitmqctl("add_vhost", name); err != nil {
		if Required() {
			t.Fatalf("adding a vhost of the test's own: %v", err)
		}
		t.Skipf("no vhost of the test's own (%v); skipping (set BORDA_REQUIRE_SERVICES=1 to fail instead)", err)
	}
	t.Cleanup(func() {
		if _, err := Rabbitmqctl("delete_vhost", name); err != nil {
			t.Errorf("deleting vhost %s: %v", name, err)
		}
	})
	v := &Vhost{t: t, Name: name, user: name}
	if _, err := rabbitmqctl("set_permissions", "-p", name, u.User.Username(), ".*", ".*", ".*"); err != nil {
		t.Fatalf("granting the admin vhost %s: %v", name, err)
	}
	pass := KeyPrefix(t) // random
	if _, err := rabbitmqctl("add_user", name, pass); err != nil {
		t.Fatalf("adding the vhost's user: %v", err)
	}
	t.Cleanup(func() {
		if _, err := rabbitmqctl("delete_user", name); err != nil {
			t.Errorf("deleting user %s: %v", name, err)
		}
	})
	v.SetPermissions(".*", ".*", ".*")
	u.Path = "/" + name
	u.RawPath = "/" + url.PathEscape(name)
	v.URL = u.String()
	u.User = url.UserPassword(name, pass)
	v.UserURL = u.String()
	return v
}

// SetPermissions sets the vhost's user's (UserURL) configure, write and
// read permissions (regular expressions) on the vhost; a connection's open
// channels see the change at their next check.
func (v *Vhost) SetPermissions(configure, write, read string) {
	v.t.Helper()
	if _, err := Rabbitmqctl("set_permissions", "-p", v.Name, v.user, configure, write, read); err != nil {
		v.t.Fatalf("setting permissions on vhost %s: %v", v.Name, err)
	}
}

// SetPolicy sets policy name on the vhost's queues matching pattern with
// definition (a JSON object, e.g. {"max-length":2}); deleted with the
// vhost.
func (v *Vhost) SetPolicy(name, pattern, definition string) {
	v.t.Helper()
	if _, err := rabbitmqctl("set_policy", "-p", v.Name, "--apply-to", "queues", name, pattern, definition); err != nil {
		v.t.Fatalf("setting policy %s on vhost %s: %v", name, v.Name, err)
	}
}

// ClearPolicy removes policy name from the vhost (`rabbitmqctl
// clear_policy -p <vhost>`).
func (v *Vhost) ClearPolicy(name string) {
	v.t.Helper()
	if _, err := rabbitmqctl("clear_policy", "-p", v.Name, name); err != nil {
		v.t.Fatalf("clearing policy %s on vhost %s: %v", name, v.Name, err)
	}
}

// Queues returns `rabbitmqctl list_queues -p <vhost>` with columns (e.g.
// "name", "messages", "policy") as name → the other columns, tab-separated.
func (v *Vhost) Queues(columns ...string) map[string]string {
	v.t.Helper()
	out, err := Rabbitmqctl(append([]string{"list_queues", "-q", "--no-table-headers", "-p", v.Name, "name"}, columns...)...)
	if err != nil {
		v.t.Fatalf("listing the queues of vhost %s: %v", v.Name, err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, rest, _ := strings.Cut(line, "\t")
		if name != "" {
			m[name] = rest
		}
	}
	return m
}

// Bindings returns the vhost's bindings as "source destination key" lines
// (`rabbitmqctl list_bindings`).
func (v *Vhost) Bindings() []string {
	v.t.Helper()
	out, err := Rabbitmqctl("list_bindings", "-q", "--no-table-headers", "-p", v.Name, "source_name", "destination_name", "routing_key")
	if err != nil {
		v.t.Fatalf("listing the bindings of vhost %s: %v", v.Name, err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		lines = append(lines, strings.Join(strings.Split(l, "\t"), " "))
	}
	return lines
}

// String is the vhost's name.
func (v *Vhost) String() string { return fmt.Sprintf("vhost %s", v.Name) }
