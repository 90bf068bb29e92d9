// Package archcheck holds tests of Borda's package structure
// (docs/architecture.md, "The import rule"): which packages may import
// which. It has no code of its own.
package archcheck
