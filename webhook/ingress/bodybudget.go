package ingress

import (
	"errors"
	"io"
	"sync/atomic"
)

// ReasonBodyBudget is the 503 reason of a signature-only source's
// delivery refused because the unauthenticated-body budget
// (Options.UnauthenticatedBodyBytes) was spent by other bodies still
// arriving; the connection is closed and the provider retries.
const ReasonBodyBudget = "BODY_BUDGET_EXHAUSTED"

// DefaultUnauthenticatedBodyBytes is Options.UnauthenticatedBodyBytes
// when 0: 64 MiB, six bodies at the default 10 MiB max_body_bytes.
const DefaultUnauthenticatedBodyBytes = 64 << 20

// errBodyBudget is what a budgetReader returns past the budget.
var errBodyBudget = errors.New("ingress: the unauthenticated-body budget is spent")

// bodyBudget bounds the bytes that unauthenticated request bodies (a
// signature-only source's, read whole before the signature can be
// checked) hold in memory at once, across every request: a body is
// charged as it arrives, byte for byte, and released when its request
// ends. Envoy's overload manager answers 503 the same way when its
// buffer budget is spent.
type bodyBudget struct {
	limit int64
	used  atomic.Int64
}

// reader charges what r yields to b; release gives it back.
func (b *bodyBudget) reader(r io.Reader) *budgetReader {
	return &budgetReader{r: r, b: b}
}

type budgetReader struct {
	r    io.Reader
	b    *bodyBudget
	held int64
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	if n > 0 {
		if br.b.used.Add(int64(n)) > br.b.limit {
			br.b.used.Add(-int64(n))
			return 0, errBodyBudget
		}
		br.held += int64(n)
	}
	return n, err
}

// release returns the bytes this reader charged (call once, when the
// request's body is no longer held).
func (br *budgetReader) release() {
	br.b.used.Add(-br.held)
	br.held = 0
}
