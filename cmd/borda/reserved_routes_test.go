package main

import (
	"strings"
	"testing"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/telemetry"
)

// The configuration refuses every route name a telemetry counter key
// would misread (telemetry.ReservedRouteNames), naming the field: configs
// keeps its own list, being a leaf, and this test keeps the two in step.
func TestConfigRefusesEveryRouteNameTelemetryReserves(t *testing.T) {
	t.Parallel()
	for _, name := range telemetry.ReservedRouteNames() {
		yaml := "routes:\n  - name: " + name + "\n    upstream: http://127.0.0.1:3000\n"
		_, err := configs.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), "routes[0].name") {
			t.Errorf("route named %q: err = %v, want a problem naming routes[0].name", name, err)
		}
	}
}
