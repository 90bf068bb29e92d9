// Package deploy holds no code: it is the home of the deployment examples
// (deploy/compose, deploy/traefik, deploy/kubernetes) and of the tests that
// keep them, the root docker-compose.yml and the Dockerfile honest, since no
// container engine or cluster runs in CI. See docs/upgrading.md and the
// comments at the top of each manifest.
package deploy
