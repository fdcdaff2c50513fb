// crwebhook is the benchmark peer for topogate's admission route: a validating webhook
// for TopologySource written the way Kubernetes ecosystem webhooks are, on
// controller-runtime's webhook server (webhook.NewServer) with a typed
// admission.Validator, the scheme's decoder, and apimachinery's field validation
// helpers. It implements rules T1-T14 (docs/rules.md) and serves
// POST /validate/topologysources over TLS with the certificate it is given.
//
// usage: crwebhook --port PORT --cert-dir DIR [--cert-name tls.crt] [--key-name tls.key]
//
//	[--host 127.0.0.1] [--worker-namespace gpustack-system]
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func main() {
	host := flag.String("host", "127.0.0.1", "listen address")
	port := flag.Int("port", 9443, "listen port")
	certDir := flag.String("cert-dir", ".", "folder holding the certificate and key")
	certName := flag.String("cert-name", "tls.crt", "certificate file name in --cert-dir")
	keyName := flag.String("key-name", "tls.key", "key file name in --cert-dir")
	workerNamespace := flag.String("worker-namespace", "gpustack-system", "namespace every reference must be in (T13)")
	flag.Parse()

	// Errors only: a per-request log line would be charged to the peer's CPU figure and
	// topogate runs with its access log off in the benchmark too.
	ctrl.SetLogger(zap.New(func(o *zap.Options) { o.Level = zapcore.ErrorLevel }))

	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, "scheme:", err)
		os.Exit(1)
	}

	server := webhook.NewServer(webhook.Options{
		Host:     *host,
		Port:     *port,
		CertDir:  *certDir,
		CertName: *certName,
		KeyName:  *keyName,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			// As topogate: TLS 1.2 minimum, HTTP/1.1 only (controller-runtime's own
			// default since the HTTP/2 rapid-reset advisories).
			c.MinVersion = tls.VersionTLS12
			c.NextProtos = []string{"http/1.1"}
		}},
	})
	validator := &TopologySourceValidator{WorkerNamespace: *workerNamespace, ReservedPrefixes: defaultReservedPrefixes}
	server.Register("/validate/topologysources", admission.WithValidator[*TopologySource](scheme, validator))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := server.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "webhook server:", err)
		os.Exit(1)
	}
}
