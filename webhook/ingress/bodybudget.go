package ingress

import (
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"
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

// ReasonBodyReclaimed is the 408 reason of a body whose bytes the budget
// took back, under pressure, for a newer body: it had been arriving for
// at least reclaimAfter, the slowest of those that had (reclaimFor); the
// connection is closed.
const ReasonBodyReclaimed = "BODY_RECLAIMED"

// errBodyBudget is what a budgetReader returns past the budget, and
// errBodyShare past the client's share of it.
var (
	errBodyBudget    = errors.New("ingress: the unauthenticated-body budget is spent")
	errBodyShare     = errors.New("ingress: this client holds its share of the body budget")
	errBodyReclaimed = errors.New("ingress: the body budget took this body's bytes back for a newer body")
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
	// holders are the readers holding bytes (guarded by mu): what
	// reclaimFor may take back.
	holders map[*budgetReader]struct{}
	// now reads the clock that ages holders (nil: time.Now).
	now func() time.Time
}

// clientShare is the part of the budget one client may hold: 1/4.
const clientShare = 4

// reclaimAfter is how long a body must have been arriving before the
// budget, spent, may take its bytes back for a newer body (reclaimFor). A
// provider's delivery arrives at network speed, within milliseconds; a
// body still arriving after a second is slow, and under pressure the
// slowest go first (fresh attack pass 15 W20: stalled bodies from four
// addresses, a quarter each, held the whole budget for body_timeout, 30 s,
// and every signed source answered 503).
const reclaimAfter = time.Second

// reader charges what r yields to b, on behalf of client; release gives
// it back.
func (b *bodyBudget) reader(r io.Reader, client string) *budgetReader {
	return &budgetReader{r: r, b: b, client: client, since: b.clock()}
}

// clock reads b's clock.
func (b *bodyBudget) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

// budgetReader charges its bytes to a bodyBudget as they arrive.
type budgetReader struct {
	r      io.Reader
	b      *bodyBudget
	client string
	held   int64 // charged (written under b.mu, by the reader's goroutine)
	read   int64 // yielded
	since  time.Time
	// abort, when set, wakes a Read blocked on the network (the request's
	// read deadline set to now) once reclaimFor took the body's bytes;
	// called with b.mu held, never after release.
	abort     func()
	reclaimed atomic.Bool
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	if br.reclaimed.Load() {
		return 0, errBodyReclaimed
	}
	if n > 0 {
		br.read += int64(n)
		if over := br.read - br.held; over > 0 {
			if err := br.b.charge(br, over); err != nil {
				return 0, err
			}
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
	return br.b.charge(br, n)
}

// charge takes n bytes for br's client; past the client's share it
// returns errBodyShare, past the whole budget (after reclaimFor) errBodyBudget,
// and takes nothing; a reader whose bytes were reclaimed gets
// errBodyReclaimed.
func (b *bodyBudget) charge(br *budgetReader, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if br.reclaimed.Load() {
		return errBodyReclaimed
	}
	if b.limit > 0 && b.byClient[br.client]+n > max(b.share, b.limit/clientShare, 1) {
		return errBodyShare
	}
	if b.used.Add(n) > b.limit && b.limit > 0 {
		b.used.Add(-n)
		if !b.reclaimFor(n, br) {
			return errBodyBudget
		}
		b.used.Add(n)
	}
	if b.byClient == nil {
		b.byClient = map[string]int64{}
		b.holders = map[*budgetReader]struct{}{}
	}
	b.byClient[br.client] += n
	br.held += n
	b.holders[br] = struct{}{}
	return nil
}

// reclaimFor takes back the bytes of holders that have been arriving for
// at least reclaimAfter, the slowest first (bytes held per second of
// age), until n more bytes fit, and reports whether they do. A reclaimed
// reader's next Read (woken by its abort) fails with errBodyReclaimed, and
// its request answers 408 BODY_RECLAIMED: under pressure a body that
// trickles in gives way to one that arrives. b.mu is held; except (the
// reader asking) is never taken.
func (b *bodyBudget) reclaimFor(n int64, except *budgetReader) bool {
	now := b.clock()
	var old []*budgetReader
	for h := range b.holders {
		if h != except && now.Sub(h.since) >= reclaimAfter {
			old = append(old, h)
		}
	}
	rate := func(h *budgetReader) float64 { return float64(h.held) / now.Sub(h.since).Seconds() }
	slices.SortFunc(old, func(x, y *budgetReader) int {
		switch rx, ry := rate(x), rate(y); {
		case rx < ry:
			return -1
		case rx > ry:
			return 1
		}
		return x.since.Compare(y.since)
	})
	for _, h := range old {
		if b.used.Load()+n <= b.limit {
			break
		}
		h.reclaimed.Store(true)
		b.used.Add(-h.held)
		if b.byClient[h.client] -= h.held; b.byClient[h.client] <= 0 {
			delete(b.byClient, h.client)
		}
		delete(b.holders, h)
		if h.abort != nil {
			h.abort()
		}
	}
	return b.used.Load()+n <= b.limit
}

// settle marks the body read: its bytes stay charged until release, but
// it is no longer arriving, and reclaimFor never takes it (its request is
// being verified and published; waking its connection's reads then would
// cancel the request).
func (br *budgetReader) settle() {
	br.b.mu.Lock()
	delete(br.b.holders, br)
	br.b.mu.Unlock()
}

// release returns the bytes this reader charged (call once, when the
// request's body is no longer held); a reclaimed reader's were returned
// already.
func (br *budgetReader) release() {
	b := br.b
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.holders, br)
	if br.held == 0 || br.reclaimed.Load() {
		br.held = 0
		return
	}
	if b.byClient[br.client] -= br.held; b.byClient[br.client] <= 0 {
		delete(b.byClient, br.client)
	}
	b.used.Add(-br.held)
	br.held = 0
}
