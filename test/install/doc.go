// Package install tests how Runbook is installed: the kustomize tree under
// config/, the Helm chart under charts/runbook, the least-privilege RBAC the
// controllers' markers generate, and the static manager binary the image is
// built from. The tools run are the pinned ones in bin/ (`make tools`); a
// missing tool fails the test with the command that installs it.
package install
