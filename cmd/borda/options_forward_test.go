package main

import (
	"slices"
	"testing"

	"github.com/olp-edu/borda/configs"
)

// TestForwardOptionsMapSignatureVersions: forward.signature_versions
// reaches the forwarder as written; the default sends both versions.
func TestForwardOptionsMapSignatureVersions(t *testing.T) {
	cfg := configs.Default()
	if got := forwardOptions(cfg).SignatureVersions; !slices.Equal(got, []string{"v1", "v2"}) {
		t.Errorf("default signature versions %q, want [v1 v2]", got)
	}
	cfg.Forward.SignatureVersions = []string{"v2"}
	if got := forwardOptions(cfg).SignatureVersions; !slices.Equal(got, []string{"v2"}) {
		t.Errorf("signature versions %q, want [v2]", got)
	}
}
