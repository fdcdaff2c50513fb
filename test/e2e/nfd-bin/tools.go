//go:build tools

// Package tools pins NFD's nfd-master that test/e2e/nfd.sh runs against a local
// kube-apiserver. Nothing imports it; the blank import keeps `go mod tidy` from
// dropping the requirement, and build-nfd.sh builds the main package from this
// module so its requirements (and the replace lines copied here from NFD's
// go.mod, which a dependency's own go.mod cannot impose) apply.
package tools

import (
	_ "sigs.k8s.io/node-feature-discovery/cmd/nfd-master"
)
