package ingress

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// ReasonBodyBudget is the 503 reason of a signature-only source's
// delivery refused because the unauthenticated-body budget
// (Options.UnauthenticatedBodyBytes) was spent by other bodies still
// arriving; the connection is closed and the provider retries.
const ReasonBodyBudget = "BODY_BUDGET_EXHAUSTED"

// ReasonBodyShare is the 429 reason of a delivery refused because its
// client already holds its share of the body budget (a quarter) in bodies
// still arriving: the client's own doing, so a 429 and not a 503, which
// would count as the service's unavailability (fresh attack pass A035:
// one address kept the broker-down alert firing).
const ReasonBodyShare = "BODY_SHARE_EXHAUSTED"

// errBodyBudget is what a budgetReader returns past the budget, and
// errBodyShare past the client's share of it.
var (
	errBodyBudget = errors.New("ingress: the unauthenticated-body budget is spent")
	errBodyShare  = errors.New("ingress: this client holds its share of the body budget")
)

// bodyBudget bounds the bytes that unauthenticated request bodies (a
// signature-only source's, read whole before the signature can be
// checked) hold in memory at once, across every request: a body is
// charged as it arrives, byte for byte, and released when its request
// ends. Envoy's overload manager answers 503 the same way when its
// buffer budget is spent.
type bodyBudget struct {
	limit int64 // 0: no budget (charges are counted, never refused)
	// share is what one client may hold (0: limit/clientShare); New sets
	// it to at least the largest body, so one delivery of the largest
	// size a source accepts always fits.
	share int64
	used  atomic.Int64

	// mu guards byClient: what each client (its rate-limit subject) holds.
	// One client holds at most a quarter of limit (clientShare), so one
	// address with a few slow bodies cannot spend the budget of every
	// signed source (nginx limit_conn's idea, per client, applied to bytes).
	mu       sync.Mutex
	byClient map[string]int64
}

// clientShare is the part of the budget one client may hold: 1/4.
const clientShare = 4

// reader charges what r yields to b, on behalf of client; release gives
// it back.
func (b *bodyBudget) reader(r io.Reader, client string) *budgetReader {
	return &budgetReader{r: r, b: b, client: client}
}

// budgetReader charges its bytes to a bodyBudget as they arrive.
type budgetReader struct {
	r      io.Reader
	b      *bodyBudget
	client string
	held   int64 // charged
	read   int64 // yielded
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	if n > 0 {
		br.read += int64(n)
		if over := br.read - br.held; over > 0 {
			if err := br.b.charge(br.client, over); err != nil {
				return 0, err
			}
			br.held += over
		}
	}
	return n, err
}

// reserve charges n bytes at once, before any is read: what a buffer
// allocated from the Content-Length holds (a token source's body is read
// into one of that size). An error (errBodyShare or errBodyBudget):
// nothing charged.
func (br *budgetReader) reserve(n int64) error {
	if n <= 0 {
		return nil
	}
	if err := br.b.charge(br.client, n); err != nil {
		return err
	}
	br.held += n
	return nil
}

// charge takes n bytes for client; past the client's share it returns
// errBodyShare, past the whole budget errBodyBudget, and takes nothing.
func (b *bodyBudget) charge(client string, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit > 0 && b.byClient[client]+n > max(b.share, b.limit/clientShare, 1) {
		return errBodyShare
	}
	if b.used.Add(n) > b.limit && b.limit > 0 {
		b.used.Add(-n)
		return errBodyBudget
	}
	if b.byClient == nil {
		b.byClient = map[string]int64{}
	}
	b.byClient[client] += n
	return nil
}

// release returns the bytes this reader charged (call once, when the
// request's body is no longer held).
func (br *budgetReader) release() {
	if br.held == 0 {
		return
	}
	b := br.b
	b.mu.Lock()
	if b.byClient[br.client] -= br.held; b.byClient[br.client] <= 0 {
		delete(b.byClient, br.client)
	}
	b.mu.Unlock()
	b.used.Add(-br.held)
	br.held = 0
}
