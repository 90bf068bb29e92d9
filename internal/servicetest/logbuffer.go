package servicetest

import (
	"strings"
	"sync"
)

// LogBuffer collects what a test's logger writes, safely from any
// goroutine (a slog handler's writer is called from the goroutine that
// logs: a background loop, a breaker callback).
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
