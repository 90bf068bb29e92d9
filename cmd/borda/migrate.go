package main

import (
	"context"
	"fmt"
	"io"
)

// runMigrate is a placeholder until its issue lands.
func runMigrate(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "borda: not implemented yet")
	return 1
}
