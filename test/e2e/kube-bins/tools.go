//go:build tools

// Package tools pins the Kubernetes control-plane binaries the end-to-end
// tests run. Nothing imports it; the blank imports keep `go mod tidy` from
// dropping the requirements, and build-kube-bins.sh builds each main package
// from this module so the replace lines below apply.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
