// Package repocheck holds tests about the repository itself rather than
// about one package: what a fresh `git clone`, with nothing beside it,
// needs in order to pass its own tests (README.md, "Tests").
package repocheck
