// Command client fetches one snapshot the way GPUStack's TopologySource
// webhook reader does and applies the S rules it can without a Node list.
// It exits 0 and prints the revision when the consumer would accept the
// snapshot, and exits 1 with every error otherwise (2 on usage errors).
//
//	client --url https://host/snapshots/dc --ca ca.crt --token-file token \
//	       [--levels a,b,c] [--additional-write-prefix p/] [--timeout 10s]
//	client --url ... --ca ca.crt --cert tls.crt --key tls.key ...
//	client --file snapshot.yaml --levels ...   (decode and check a local file)
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"topogate.invalid/conformance/internal/consumer"
)

func main() {
	var (
		url     = flag.String("url", "", "snapshot URL (https)")
		file    = flag.String("file", "", "check a local snapshot file instead of fetching")
		ca      = flag.String("ca", "", "CA bundle (ca.crt) that verifies the server")
		token   = flag.String("token-file", "", "bearer token file")
		cert    = flag.String("cert", "", "client certificate (tls.crt)")
		key     = flag.String("key", "", "client key (tls.key)")
		levels  = flag.String("levels", "", "comma-separated TopologySource levels (enables S4, S5, S8, S9)")
		prefix  = flag.String("additional-write-prefix", "", "TopologySource additionalWritePrefix")
		timeout = flag.Duration("timeout", 10*time.Second, "request timeout (webhook.timeout)")
	)
	flag.Parse()
	if (*url == "") == (*file == "") {
		fmt.Fprintln(os.Stderr, "client: exactly one of --url and --file is required")
		os.Exit(2)
	}
	var body []byte
	var err error
	if *file != "" {
		body, err = os.ReadFile(*file)
		if err == nil && len(body) > consumer.MaxBody {
			err = fmt.Errorf("S10: file exceeds %d bytes", consumer.MaxBody)
		}
	} else {
		creds := consumer.Credentials{CAFile: *ca, TokenFile: *token, CertFile: *cert, KeyFile: *key}
		var client = mustClient(creds, *timeout)
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		body, err = consumer.Fetch(ctx, client, *url, creds)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
	snap, err := consumer.Decode(body)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
	var lv []string
	if *levels != "" {
		lv = strings.Split(*levels, ",")
	}
	if v := consumer.Check(snap, lv, *prefix); len(v) > 0 {
		for _, e := range v {
			fmt.Fprintln(os.Stderr, "client:", e)
		}
		os.Exit(1)
	}
	fmt.Printf("accepted revision %q with %d nodes (%d bytes)\n", snap.Revision, len(snap.Nodes), len(body))
}

func mustClient(c consumer.Credentials, timeout time.Duration) *http.Client {
	cl, err := consumer.NewClient(c, timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(2)
	}
	return cl
}
