package main

import (
	"github.com/olp-edu/borda/identity"
	"github.com/olp-edu/borda/internal/startstop"
)

// The identity verifier is built by gateway.New from the auth section
// (gateway/options_identity.go) while gateway.New takes configs.Config; its
// mapping moves here with the gateway's own options.
var _ startstop.Service = (*identity.Verifier)(nil)
