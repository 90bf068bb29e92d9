package main

import (
	"context"
	"fmt"
	"io"
)

// runLimits is a placeholder until its issue lands.
func runLimits(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "borda: not implemented yet")
	return 1
}
