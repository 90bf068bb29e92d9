package brokernode

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A test in `go test ./...` raised a memory alarm on whatever RabbitMQ it
// reached (the shared one), and another gateway answered 503
// BROKER_BLOCKED for 5.5 s; delivery-limit policies went to the shared
// broker too. No Go file outside this package (whose every node-wide
// operation refuses the shared broker) may spell a node-wide rabbitmqctl
// command; servicetest.Rabbitmqctl refuses them (NodeWide).
func TestNodeWideRabbitmqctlOnlyThroughPrivateNodes(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	verbs := regexp.MustCompile(`"(set_vm_memory_high_watermark|set_policy|clear_policy|set_operator_policy|stop_app|set_disk_free_limit)"`)
	allowed := map[string]bool{
		"internal/brokernode/brokernode.go":      true,
		"internal/brokernode/nodewide_test.go":   true,
		"internal/brokernode/brokernode_test.go": true,
		"internal/brokernode/cluster.go":         true,
		"internal/servicetest/broker.go":         true, // the deny list
		// Vhost.SetPolicy: a policy scoped with -p to the test's own vhost
		// (NewVhost), which nothing else uses; checked below.
		"internal/servicetest/vhost.go": true,
	}
	vhost, err := os.ReadFile(filepath.Join(root, "internal", "servicetest", "vhost.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(vhost), "\n") {
		if verbs.MatchString(line) && !strings.Contains(line, `"-p", v.Name`) {
			t.Errorf("internal/servicetest/vhost.go runs a node-wide verb without -p <the test's vhost>: %s", strings.TrimSpace(line))
		}
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if allowed[filepath.ToSlash(rel)] {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range verbs.FindAllString(string(b), -1) {
			t.Errorf("%s runs rabbitmqctl %s: node-wide state goes through internal/brokernode (a private node), never the shared broker", rel, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
