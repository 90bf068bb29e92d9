// Package doccheck holds tests of the claims README.md and docs/*.md make
// about the code, the kinds that drift when code moves (docs/testing.md,
// "Docs that stay true"): every repository path they name exists; every
// Borda identifier they name (`ratelimit.Options.Timeout`,
// `(*Limiter).Reload(rules)`, `TestX`) exists, with the arity or the types
// they spell; every Go snippet is a named piece of compiled code; the
// README's layout table covers the tree and its "what skips" table is the
// one the tests' service helpers imply. It has no code of its own.
package doccheck
