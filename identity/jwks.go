package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"golang.org/x/time/rate"

	"github.com/olp-edu/borda/internal/egress"
	"github.com/olp-edu/borda/internal/redact"
)

// UnknownKIDRefetchEvery is the least time between two JWKS fetches
// triggered by tokens whose kid the key set does not hold: a key the
// issuer just added verifies as soon as the fetch its first token
// triggered completes, and a flood of made-up kids costs the JWKS server
// at most one request per interval.
const UnknownKIDRefetchEvery = 10 * time.Second

// jwksHTTPTimeout bounds one JWKS fetch.
const jwksHTTPTimeout = 5 * time.Second

// JWKSMaxBytes bounds a JWKS document (1 MiB: a set of dozens of RSA keys
// is tens of KiB). A larger one fails the fetch, the last keys kept: an
// unbounded read let a key server grow every replica to 1.75 GB with a
// 400 MB document, again at every refresh (fresh attack pass 21 A14).
const JWKSMaxBytes = 1 << 20

// jwksClient is the HTTP client of the JWKS fetches: response heads
// bounded (egress.Transport), bodies bounded by JWKSMaxBytes, and no
// redirect followed (a 3xx fails the fetch: a redirect to an internal
// address, or from https to http, made the gateway fetch it at every
// refresh, fresh attack pass 21 A13; the configured URL is the one
// `config check` vets).
func jwksClient() *http.Client {
	return egress.Client(boundedBodies{egress.Transport(), JWKSMaxBytes}, 0)
}

// boundedBodies is a RoundTripper whose response bodies fail past max
// bytes (*http.MaxBytesError) instead of being read whole, and whose 200
// answers must be a JWK Set: a JSON object with a "keys" array (RFC 7517
// §5), else errNotAKeySet. A 200 of anything else (`{"error":...}`) was
// read as an empty set and made every token anonymous until the next good
// fetch (fresh attack pass 21 A46); an explicit `{"keys":[]}` still
// replaces the set (an issuer revoking its only key).
type boundedBodies struct {
	rt  http.RoundTripper
	max int64
}

// errNotAKeySet: a JWKS URL answered 200 with a document that is not a
// JWK Set.
var errNotAKeySet = errors.New(`the JWKS answer is not a JWK Set (a JSON object with a "keys" array); the last keys are kept`)

func (b boundedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := b.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if err := egress.RedirectError(res); err != nil {
		// jwkset would say "invalid HTTP status code: 302" and no more.
		res.Body.Close()
		return nil, err
	}
	body := http.MaxBytesReader(nil, res.Body, b.max)
	if res.StatusCode != http.StatusOK {
		res.Body = body
		return res, nil
	}
	doc, err := io.ReadAll(body)
	body.Close()
	if err != nil {
		return nil, err
	}
	var set struct {
		Keys *[]json.RawMessage `json:"keys"`
	}
	if json.Unmarshal(doc, &set) != nil || set.Keys == nil {
		return nil, errNotAKeySet
	}
	res.Body = io.NopCloser(bytes.NewReader(doc))
	return res, nil
}

// keySet is the JWKS key storage; every replacement that changes the keys
// (a fetch that added, removed or altered one) starts a new generation,
// so tokens verified under the old keys are checked again.
type keySet struct {
	jwkset.Storage
	gen atomic.Uint64

	mu   sync.Mutex
	last []byte // fingerprint of the keys of the last replacement
}

// generation returns the current generation; 0 on a nil keySet.
func (k *keySet) generation() uint64 {
	if k == nil {
		return 0
	}
	return k.gen.Load()
}

// KeyReplaceAll replaces the keys and starts a new generation when they
// differ from the previous ones.
func (k *keySet) KeyReplaceAll(ctx context.Context, given []jwkset.JWK) error {
	if err := k.Storage.KeyReplaceAll(ctx, given); err != nil {
		return err
	}
	var fp bytes.Buffer
	for _, j := range given {
		b, _ := json.Marshal(j.Marshal()) // public parts only (no private key requested)
		fp.Write(b)
		fp.WriteByte('\n')
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !bytes.Equal(fp.Bytes(), k.last) {
		k.last = fp.Bytes()
		k.gen.Add(1)
	}
	return nil
}

// loadJWKS builds the key set of url: one jwkset HTTP storage (fetched
// now, within ctx, into v.keys; again by Start's refresher) read through
// two clients, one for the request path that never fetches and one that
// fetches on an unknown kid, used by refetchUnknownKID's goroutine and by
// the refresher.
func (v *Verifier) loadJWKS(ctx context.Context, url string, logger *slog.Logger) error {
	store, err := jwkset.NewStorageFromHTTP(url, jwkset.HTTPClientStorageOptions{
		Ctx:                       ctx,
		Client:                    jwksClient(), // jwkset's default reads 10 MB heads, any body, and follows redirects
		HTTPTimeout:               jwksHTTPTimeout,
		NoErrorReturnFirstHTTPReq: true,
		Storage:                   v.keys,
		RefreshErrorHandler: func(ctx context.Context, err error) {
			logger.WarnContext(ctx, "fetching JWKS failed", "error", redact.Error(err))
		},
	})
	if err != nil {
		return fmt.Errorf("loading JWKS: %w", redact.Error(err))
	}
	reader, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{HTTPURLs: map[string]jwkset.Storage{url: store}})
	if err == nil {
		v.refetcher, err = jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
			HTTPURLs:          map[string]jwkset.Storage{url: store},
			RefreshUnknownKID: rate.NewLimiter(rate.Inf, 1), // kidLimiter decides
		})
	}
	if err == nil {
		v.jwks, err = keyfunc.New(keyfunc.Options{Ctx: v.ctx, Storage: reader})
	}
	if err != nil {
		return fmt.Errorf("loading JWKS: %w", redact.Error(err))
	}
	v.kidLimiter = rate.NewLimiter(rate.Every(UnknownKIDRefetchEvery), 1)
	return nil
}

// refreshKID is a kid no JWKS holds: reading it through the refetcher
// fetches the document again (jwkset refreshes on an unknown kid).
const refreshKID = "\x00borda:jwks-refresh"

// Start runs the JWKS refresher (every Options.JWKSRefresh) until ctx
// ends or Stop is called; without a JWKS URL it does nothing. It returns
// at once; a second Start is a no-op. Safe on nil.
func (v *Verifier) Start(ctx context.Context) error {
	if v == nil || v.refetcher == nil {
		return nil
	}
	return v.bg.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(v.refresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fctx, cancel := context.WithTimeout(ctx, jwksHTTPTimeout)
				_, _ = v.refetcher.KeyRead(fctx, refreshKID) // fetch errors go to the RefreshErrorHandler
				cancel()
			}
		}
	})
}

// refetchUnknownKID fetches the JWKS again in the background for a token
// whose kid the key set does not hold, unless a fetch for that reason is
// running or ran less than UnknownKIDRefetchEvery ago.
func (v *Verifier) refetchUnknownKID(kid string) {
	if !v.refetching.CompareAndSwap(false, true) {
		return
	}
	if !v.kidLimiter.AllowN(v.now(), 1) {
		v.refetching.Store(false)
		return
	}
	go func() {
		defer v.refetching.Store(false)
		ctx, cancel := context.WithTimeout(v.ctx, jwksHTTPTimeout)
		defer cancel()
		_, _ = v.refetcher.KeyRead(ctx, kid) // fetch errors go to the RefreshErrorHandler
	}()
}

// Stop ends the refresher and any unknown-kid refetch, waiting for the
// refresher at most until ctx ends. A Stop without Start, a second Stop,
// and Stop on nil return nil.
func (v *Verifier) Stop(ctx context.Context) error {
	if v == nil {
		return nil
	}
	v.cancel()
	return v.bg.Stop(ctx)
}
