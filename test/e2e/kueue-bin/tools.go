//go:build tools

// Package tools pins the Kueue controller manager the TAS lab runs
// (scripts/tas-lab.sh). Nothing imports it; the blank import keeps
// `go mod tidy` from dropping the requirement, and build-kueue.sh builds the
// main package from this module so its requirements (and any replace lines
// copied here from Kueue's go.mod) apply.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
