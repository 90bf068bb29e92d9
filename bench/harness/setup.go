package harness

import (
	"context"
	"os"
	"time"
)

// Setup is what every bench run starts from: a work directory, the bench
// upstream running on loopback, and a borda binary (built when none is
// given).
type Setup struct {
	Dir          string   // removed by Close
	Borda        string   // borda binary
	UpstreamAddr string   // 127.0.0.1:port of the bench upstream
	Upstream     *Process // stopped by Close
}

// NewSetup prepares a run named name ("soak", "faults"). bordaBin may be
// empty: borda is then built from this module. Call Close when done.
func NewSetup(ctx context.Context, name, bordaBin string) (*Setup, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "borda-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	s := &Setup{Dir: dir, Borda: bordaBin}
	up, err := Build(ctx, root, dir, "./bench/cmd/upstream")
	if err != nil {
		s.Close()
		return nil, err
	}
	if s.Borda == "" {
		if s.Borda, err = Build(ctx, root, dir, "./cmd/borda"); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.UpstreamAddr, _ = FreeAddr()
	if s.Upstream, err = Start(dir, "upstream", "", nil, up, "-listen", s.UpstreamAddr); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the upstream and removes the work directory.
func (s *Setup) Close() {
	if s.Upstream != nil {
		s.Upstream.Stop(2 * time.Second)
	}
	_ = os.RemoveAll(s.Dir)
}
