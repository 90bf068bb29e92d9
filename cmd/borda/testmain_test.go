package main

import (
	"os"
	"testing"

	"github.com/olp-edu/borda/internal/servicetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	servicetest.StopRedisCluster()
	os.Exit(code)
}
