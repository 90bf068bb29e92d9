package main

import (
	"context"
	"fmt"
	"io"
)

// runConsumeEvents is a placeholder until its issue lands.
func runConsumeEvents(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "borda: not implemented yet")
	return 1
}
