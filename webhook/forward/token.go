package forward

import (
	"crypto/rand"
	"encoding/hex"
)

// newToken returns 24 random hex digits: a consumer tag's suffix, a
// lease's owner.
func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
