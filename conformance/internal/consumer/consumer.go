// Package consumer reads a topology snapshot the way GPUStack's TopologySource
// webhook reader does, so that the conformance run proves what topogate serves
// is accepted by that reader: Go net/http, TLS >= 1.2, a CA bundle from ca.crt,
// a bearer token or a client certificate, no proxy, no redirects, status
// exactly 200, at most 1 MiB, and strict gopkg.in/yaml.v3 decoding of exactly
// one document with unknown fields rejected.
package consumer

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// MaxBody is the reader's body limit (SPEC S10): 1 MiB.
const MaxBody = 1 << 20

// APIVersion is the only snapshot apiVersion the reader accepts (S1).
const APIVersion = "topology.gpustack.ai/v1alpha1"

// Snapshot is the reader's decoding target; KnownFields(true) makes any other
// key an error.
type Snapshot struct {
	APIVersion string                       `yaml:"apiVersion"`
	Revision   string                       `yaml:"revision"`
	Nodes      map[string]map[string]string `yaml:"nodes"`
}

// Credentials select how the reader authenticates: exactly one of a bearer
// token file or a client certificate/key pair (T12).
type Credentials struct {
	CAFile    string
	TokenFile string
	CertFile  string
	KeyFile   string
}

// NewClient builds the reader's HTTP client.
func NewClient(c Credentials, timeout time.Duration) (*http.Client, error) {
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", c.CAFile)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if (c.TokenFile == "") == (c.CertFile == "") {
		return nil, errors.New("exactly one of a bearer token file and a client certificate is required")
	}
	if c.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	tr := &http.Transport{
		// No proxy-derived destination: the reader dials the URL's host.
		Proxy:               nil,
		TLSClientConfig:     cfg,
		TLSHandshakeTimeout: timeout,
		DisableCompression:  true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		// Redirects are never followed; a 3xx is returned as is and then
		// refused because the status is not 200.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// Fetch GETs url and returns the body, enforcing status 200 and the 1 MiB limit.
func Fetch(ctx context.Context, client *http.Client, url string, c Credentials) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if c.TokenFile != "" {
		tok, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("read token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("unexpected status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if len(body) > MaxBody {
		return nil, fmt.Errorf("S10: body exceeds %d bytes", MaxBody)
	}
	return body, nil
}

// Decode parses exactly one strict YAML/JSON document.
func Decode(body []byte) (*Snapshot, error) {
	dec := yaml.NewDecoder(bytes.NewReader(body))
	dec.KnownFields(true)
	var s Snapshot
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("S1: empty snapshot")
		}
		return nil, fmt.Errorf("S1: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("S1: more than one YAML document")
	}
	return &s, nil
}

// Violation is one failed S rule.
type Violation struct {
	Rule   string
	Path   string
	Detail string
}

func (v Violation) String() string { return fmt.Sprintf("%s %s: %s", v.Rule, v.Path, v.Detail) }

var labelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

var readOnlyParents = map[string]bool{
	"topology.kubernetes.io/region": true,
	"topology.kubernetes.io/zone":   true,
}

// Check applies the S rules that need no Node list: S1, S2, S4, S5, S7, S8,
// S9. levels and writePrefix come from the TopologySource the snapshot feeds;
// with no levels only S1, S2 and S7 are checked. Nodes are visited in name
// order so the output is stable.
func Check(s *Snapshot, levels []string, writePrefix string) []Violation {
	var out []Violation
	if s.APIVersion != APIVersion {
		out = append(out, Violation{"S1", "apiVersion", fmt.Sprintf("must be %s, got %q", APIVersion, s.APIVersion)})
	}
	if strings.TrimSpace(s.Revision) == "" {
		out = append(out, Violation{"S2", "revision", "must not be blank"})
	}
	index := map[string]int{}
	for i, l := range levels {
		index[l] = i
	}
	names := make([]string, 0, len(s.Nodes))
	for n := range s.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	type childKey struct {
		level int
		value string
	}
	parents := map[childKey]string{}
	for _, n := range names {
		labels := s.Nodes[n]
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := labels[k]
			path := fmt.Sprintf("nodes[%s][%s]", n, k)
			if v == "" || len(v) > 63 || !labelValue.MatchString(v) {
				out = append(out, Violation{"S7", path, fmt.Sprintf("invalid label value %q", v)})
			}
			if levels == nil {
				continue
			}
			if _, ok := index[k]; !ok {
				out = append(out, Violation{"S4", path, "not a declared level"})
			}
			publishable := readOnlyParents[k] ||
				(strings.HasPrefix(k, "topology.gpustack.ai/") && k != "topology.gpustack.ai/profile") ||
				(writePrefix != "" && strings.HasPrefix(k, writePrefix))
			if !publishable {
				out = append(out, Violation{"S5", path, "key may not be published"})
			}
		}
		if levels == nil {
			continue
		}
		deepest := -1
		for i, l := range levels {
			if _, ok := labels[l]; ok {
				deepest = i
			}
		}
		for i := 0; i < deepest; i++ {
			if _, ok := labels[levels[i]]; !ok {
				out = append(out, Violation{"S8", fmt.Sprintf("nodes[%s]", n),
					fmt.Sprintf("carries %s without its parent %s", levels[deepest], levels[i])})
			}
		}
		var tuple []string
		for i := 0; i <= deepest; i++ {
			v, ok := labels[levels[i]]
			if !ok {
				break
			}
			if i > 0 {
				key := childKey{i, v}
				anc := strings.Join(tuple, "\x00")
				if prev, seen := parents[key]; seen && prev != anc {
					out = append(out, Violation{"S9", fmt.Sprintf("nodes[%s][%s]", n, levels[i]),
						fmt.Sprintf("value %q appears under two different parents", v)})
				} else if !seen {
					parents[key] = anc
				}
			}
			tuple = append(tuple, v)
		}
	}
	return out
}
