// Command labeler stands in for the operator's NFD path in the TAS lab
// (scripts/tas-lab.sh): it reads a topology snapshot from topogate over HTTPS
// exactly as the conformance consumer does (internal/consumer: CA bundle,
// bearer token or client certificate, status 200, 1 MiB, strict decoding, the
// S rules for the TopologySource's levels), takes each Node's profile from the
// revision's profile-change impact topogate reports (GET .../status), checks it
// against its own derivation (longest populated prefix of the levels plus
// kubernetes.io/hostname, FNV-1a 64 over the NUL-joined keys), and writes the
// labels as the consumer does (nfd.go): one NodeFeature per described Node, which
// NFD's nfd-master applies, waited for; then the profile label on each Node
// directly. With --direct it merge-patches the labels and the profile onto the
// Nodes itself (no NFD). It prints one JSON object: {"revision","nodes":{NAME:{"profile",
// "levels","labels"}},"profiles":{ID:[levels]}}.
//
//	labeler --url https://127.0.0.1:PORT/snapshots/lab --ca ca.crt --token-file token \
//	        --levels a,b --api https://127.0.0.1:6443 --api-ca ca.crt --api-token-file admin.token
//
// Without --api nothing is written (a dry run). Exit 1 when the snapshot is
// refused, a profile disagrees or a patch fails; 2 on usage errors.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"topogate.invalid/conformance/internal/consumer"
)

const (
	hostnameLabel = "kubernetes.io/hostname"
	profileLabel  = "topology.gpustack.ai/profile"
)

var tierKey = regexp.MustCompile(`^fabric\.topograph\.run/tier-([0-9]{1,18})$`)

func fail(code int, format string, a ...any) {
	fmt.Fprintf(os.Stderr, "labeler: "+format+"\n", a...)
	os.Exit(code)
}

// normalize orders each run of fabric.topograph.run/tier-N keys by descending N.
func normalize(levels []string) []string {
	out := append([]string(nil), levels...)
	tier := func(k string) (uint64, bool) {
		m := tierKey.FindStringSubmatch(k)
		if m == nil {
			return 0, false
		}
		n, err := strconv.ParseUint(m[1], 10, 64)
		return n, err == nil
	}
	for i := 0; i < len(out); {
		if _, ok := tier(out[i]); !ok {
			i++
			continue
		}
		j := i
		for j < len(out) {
			if _, ok := tier(out[j]); !ok {
				break
			}
			j++
		}
		run := out[i:j]
		sort.SliceStable(run, func(a, b int) bool {
			x, _ := tier(run[a])
			y, _ := tier(run[b])
			return x > y
		})
		i = j
	}
	return out
}

// derive is the profile of a Node with labels under levels.
func derive(levels []string, labels map[string]string) (string, []string) {
	var keys []string
	for _, l := range normalize(levels) {
		if _, ok := labels[l]; !ok {
			break
		}
		keys = append(keys, l)
	}
	keys = append(keys, hostnameLabel)
	h := fnv.New64a()
	h.Write([]byte(strings.Join(keys, "\x00")))
	return fmt.Sprintf("fnv64-%016x", h.Sum64()), keys
}

type impactItem struct {
	Node string `json:"node"`
	From string `json:"from"`
	To   string `json:"to"`
}
type impactList struct {
	Items     []impactItem `json:"items"`
	Truncated bool         `json:"truncated"`
}
type status struct {
	Served *struct {
		Revision string `json:"revision"`
	} `json:"served"`
	LastAttempt *struct {
		Revision string `json:"revision"`
		Result   string `json:"result"`
		Impact   *struct {
			ChangedNodes     impactList `json:"changedNodes"`
			AddedNodes       impactList `json:"addedNodes"`
			AppearedProfiles []struct {
				ID     string   `json:"id"`
				Levels []string `json:"levels"`
			} `json:"appearedProfiles"`
		} `json:"impact"`
	} `json:"lastAttempt"`
}

func apiClient(caFile string) *http.Client {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		fail(2, "read API CA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fail(2, "API CA %s holds no certificate", caFile)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: nil, TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}}}
}

func main() {
	var (
		url      = flag.String("url", "", "snapshot URL (https), e.g. https://127.0.0.1:PORT/snapshots/lab")
		ca       = flag.String("ca", "", "CA bundle that verifies topogate")
		token    = flag.String("token-file", "", "reader bearer token file")
		cert     = flag.String("cert", "", "reader client certificate")
		key      = flag.String("key", "", "reader client key")
		levels   = flag.String("levels", "", "comma-separated TopologySource levels")
		api      = flag.String("api", "", "Kubernetes API URL (omit for a dry run)")
		apiCA    = flag.String("api-ca", "", "Kubernetes API CA bundle")
		apiToken = flag.String("api-token-file", "", "Kubernetes API bearer token file")
		timeout  = flag.Duration("timeout", 10*time.Second, "request timeout")
		source   = flag.String("source", "lab", "the TopologySource the NodeFeatures belong to (its UID names and owns them)")
		wait     = flag.Duration("nfd-wait", 60*time.Second, "how long nfd-master may take to apply the NodeFeatures")
		direct   = flag.Bool("direct", false, "patch the Nodes' labels directly instead of through NodeFeatures")
	)
	flag.Parse()
	if *url == "" || *ca == "" || *levels == "" {
		fail(2, "--url, --ca and --levels are required")
	}
	lv := strings.Split(*levels, ",")
	creds := consumer.Credentials{CAFile: *ca, TokenFile: *token, CertFile: *cert, KeyFile: *key}
	cl, err := consumer.NewClient(creds, *timeout)
	if err != nil {
		fail(2, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	body, err := consumer.Fetch(ctx, cl, *url, creds)
	if err != nil {
		fail(1, "fetch %s: %v", *url, err)
	}
	snap, err := consumer.Decode(body)
	if err != nil {
		fail(1, "%v", err)
	}
	if v := consumer.Check(snap, lv, ""); len(v) > 0 {
		for _, e := range v {
			fmt.Fprintln(os.Stderr, "labeler:", e)
		}
		os.Exit(1)
	}

	// The profile topogate computed for each Node of this revision.
	sbody, err := consumer.Fetch(ctx, cl, strings.TrimSuffix(*url, "/")+"/status", creds)
	if err != nil {
		fail(1, "fetch status: %v", err)
	}
	var st status
	if err := json.Unmarshal(sbody, &st); err != nil {
		fail(1, "decode status: %v", err)
	}
	served := map[string]string{}
	if st.LastAttempt != nil && st.LastAttempt.Impact != nil && st.LastAttempt.Revision == snap.Revision {
		for _, l := range []impactList{st.LastAttempt.Impact.AddedNodes, st.LastAttempt.Impact.ChangedNodes} {
			for _, it := range l.Items {
				served[it.Node] = it.To
			}
		}
	}

	type nodeOut struct {
		Profile string            `json:"profile"`
		Levels  []string          `json:"levels"`
		Labels  map[string]string `json:"labels"`
		Source  string            `json:"profileSource"`
	}
	out := struct {
		Revision string              `json:"revision"`
		Nodes    map[string]nodeOut  `json:"nodes"`
		Profiles map[string][]string `json:"profiles"`
	}{snap.Revision, map[string]nodeOut{}, map[string][]string{}}
	names := make([]string, 0, len(snap.Nodes))
	for n := range snap.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	bad := 0
	for _, n := range names {
		id, keys := derive(lv, snap.Nodes[n])
		src := "derived"
		if t, ok := served[n]; ok {
			src = "topogate"
			if t != id {
				fmt.Fprintf(os.Stderr, "labeler: node %s: topogate reports profile %s, the levels derive to %s\n", n, t, id)
				bad++
				continue
			}
		}
		labels := map[string]string{profileLabel: id}
		for k, v := range snap.Nodes[n] {
			labels[k] = v
		}
		out.Nodes[n] = nodeOut{id, keys, labels, src}
		out.Profiles[id] = keys
	}
	if bad > 0 {
		os.Exit(1)
	}
	if *api != "" {
		tok, err := os.ReadFile(*apiToken)
		if err != nil {
			fail(2, "read API token: %v", err)
		}
		a := &kube{base: strings.TrimSuffix(*api, "/"), token: strings.TrimSpace(string(tok)), cl: apiClient(*apiCA)}
		if *direct {
			for _, n := range names {
				if err := a.mergePatchNode(n, out.Nodes[n].Labels); err != nil {
					fmt.Fprintf(os.Stderr, "labeler: patch node %s: %v\n", n, err)
					bad++
				}
			}
		} else {
			want := map[string]map[string]string{}
			for _, n := range names {
				want[n] = snap.Nodes[n]
			}
			bad += a.throughNFD(*source, lv, want, *wait)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.Encode(out)
	if bad > 0 {
		os.Exit(1)
	}
}
