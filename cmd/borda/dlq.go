package main

import (
	"context"
	"fmt"
	"io"
)

// runDLQ is a placeholder until its issue lands.
func runDLQ(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "borda: not implemented yet")
	return 1
}
