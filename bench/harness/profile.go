package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// SaveProfile saves to path a CPU profile of d (whole seconds, at least 1)
// taken from the net/http/pprof endpoint at admin ("http://host:port").
func SaveProfile(ctx context.Context, admin string, d time.Duration, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	secs := max(int(d.Seconds()), 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", admin, secs), nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: d + 10*time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("fetching profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("saving profile: %w", err)
	}
	return f.Close()
}
