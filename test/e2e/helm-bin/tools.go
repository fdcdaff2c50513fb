//go:build tools

// Package tools pins the helm CLI the chart tests run. It lives in its own
// module so helm's dependency graph cannot move the versions the
// control-plane module builds kube-apiserver with.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
