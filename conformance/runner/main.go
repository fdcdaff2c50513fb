// Command runner replays conformance/cases/** against a live topogate over
// HTTPS and prints pass/fail per case and a summary line "N passed, M failed".
//
// It starts topogate itself (--topogate BINARY) with a generated
// configuration: certificates from certs/, and for every snapshot case two
// push-enabled inventories fed by that case's TopologySource (and Node list),
// one read over a bearer token and one over mTLS. Then:
//   - topologysource / modeldeployment cases: the input wrapped in an
//     AdmissionReview v1 CREATE, POSTed to /validate/<plural>; verdict =
//     response.allowed, rules = the [RULE] prefixes of status.details.causes,
//     warnings = response.warnings.
//   - snapshot cases: PUT /snapshots/<inventory> with the writer credential.
//     Valid: 200/201, then GET returns the same revision and nodes (JSON and
//     YAML), and the consumer-faithful reader accepts it over bearer and mTLS.
//     Invalid: 422 with the expected rules, and nothing is served afterwards.
//
// case.yaml: kind (topologysource|modeldeployment|snapshot), input (object,
// raw text, or a file name next to case.yaml), source (TopologySource or its
// spec, for snapshots), nodes (NodeList, list of Nodes, or name -> labels),
// operation (default CREATE), expect {verdict, rules, warnings}.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"topogate.invalid/conformance/internal/consumer"
)

type expectation struct {
	Verdict  string    `yaml:"verdict"`
	Rules    []string  `yaml:"rules"`
	Warnings yaml.Node `yaml:"warnings"`
	// Errors the consumer reports, each of which must be among the causes with the same
	// field and type (more causes may follow).
	Errors []expectedError `yaml:"errors"`
	// nodelabels cases: each Node's profile id, as the consumer derives it.
	Profiles map[string]string `yaml:"profiles"`
}

type expectedError struct {
	Path string `yaml:"path"`
	Type string `yaml:"type"`
}

// causeReasons maps a field-error type to the cause reason the apiserver's Status carries.
var causeReasons = map[string]string{
	"Required value":    "FieldValueRequired",
	"Invalid value":     "FieldValueInvalid",
	"Forbidden":         "FieldValueForbidden",
	"Duplicate value":   "FieldValueDuplicate",
	"Too many":          "FieldValueTooMany",
	"Unsupported value": "FieldValueNotSupported",
	"Too long":          "FieldValueTooLong",
	"Not found":         "FieldValueNotFound",
}

type caseFile struct {
	Kind      string      `yaml:"kind"`
	Input     yaml.Node   `yaml:"input"`
	InputFile string      `yaml:"inputFile"`
	Source    yaml.Node   `yaml:"source"`
	Nodes     yaml.Node   `yaml:"nodes"`
	Operation string      `yaml:"operation"`
	Expect    expectation `yaml:"expect"`
}

type testCase struct {
	id    string // path relative to the cases root, without /case.yaml
	dir   string
	root  string
	file  caseFile
	input []byte // raw bytes for snapshots; JSON for admission objects
	inv   string // inventory base name for snapshot cases
	// levels and prefix of the case's TopologySource, for the consumer check.
	levels []string
	prefix string
	err    error // a case that cannot be loaded fails with this
}

func main() {
	var (
		casesDir = flag.String("cases", "conformance/cases", "case corpus root")
		binary   = flag.String("topogate", os.Getenv("TOPOGATE_BINARY"), "topogate binary to start")
		certsDir = flag.String("certs", "certs", "folder with make-ca.sh, make-server-cert.sh, make-client-cert.sh")
		filter   = flag.String("run", "", "only cases whose id matches this regular expression")
		keep     = flag.Bool("keep", false, "keep the work folder (configuration, logs)")
		verbose  = flag.Bool("v", false, "print passing cases too")
	)
	flag.Parse()
	if *binary == "" {
		fatal("--topogate (or TOPOGATE_BINARY) is required")
	}
	start := time.Now()
	cases, err := loadCases(*casesDir, *filter)
	if err != nil {
		fatal(err.Error())
	}
	if len(cases) == 0 {
		fatal("no cases found under " + *casesDir)
	}
	work, err := os.MkdirTemp("", "topogate-conformance-")
	if err != nil {
		fatal(err.Error())
	}
	if !*keep {
		// os.Exit skips deferred calls, so every exit path runs this.
		cleanupWork = func() { _ = os.RemoveAll(work) }
		defer cleanupWork()
	} else {
		fmt.Println("work folder:", work)
	}
	env, err := setup(work, *certsDir, cases)
	if err != nil {
		fatal(err.Error())
	}
	srv, err := startTopogate(*binary, env)
	if err != nil {
		fatal(err.Error())
	}
	passed, failed := 0, 0
	for _, c := range cases {
		var err error
		if c.err != nil {
			err = c.err
		} else {
			switch c.file.Kind {
			case "topologysource", "modeldeployment":
				err = runAdmission(env, c)
			case "snapshot":
				err = runSnapshot(env, c)
			case "nodelabels":
				err = runNodeLabels(*binary, c)
			default:
				err = fmt.Errorf("unknown kind %q", c.file.Kind)
			}
		}
		if err != nil {
			failed++
			fmt.Printf("FAIL %s: %v\n", c.id, err)
		} else {
			passed++
			if *verbose {
				fmt.Printf("PASS %s\n", c.id)
			}
		}
	}
	stopErr := srv.stop()
	if stopErr != nil {
		fmt.Println("topogate:", stopErr)
		failed++
	}
	fmt.Printf("%d passed, %d failed (%s, %d cases, %.1f s)\n", passed, failed, filepath.Base(*binary),
		len(cases), time.Since(start).Seconds())
	if failed > 0 {
		if *keep {
			fmt.Println("topogate log:", srv.logPath)
		} else {
			fmt.Println("rerun with --keep to inspect the generated configuration and topogate's log")
		}
		cleanupWork()
		os.Exit(1)
	}
}

var cleanupWork = func() {}

func fatal(msg string) {
	fmt.Fprintln(os.Stderr, "runner:", msg)
	cleanupWork()
	os.Exit(2)
}

// ---- loading cases ----

func loadCases(root, filter string) ([]*testCase, error) {
	var re *regexp.Regexp
	if filter != "" {
		var err error
		if re, err = regexp.Compile(filter); err != nil {
			return nil, err
		}
	}
	var out []*testCase
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != "case.yaml" {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		if re != nil && !re.MatchString(rel) {
			return nil
		}
		c := &testCase{id: rel, dir: filepath.Dir(path), root: root}
		c.err = c.load(path)
		c.inv = fmt.Sprintf("case-%03d", len(out))
		out = append(out, c)
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, err
}

func (c *testCase) load(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(raw, &c.file); err != nil {
		return fmt.Errorf("case.yaml: %w", err)
	}
	if c.file.Operation == "" {
		c.file.Operation = "CREATE"
	}
	for _, n := range []*yaml.Node{&c.file.Source, &c.file.Nodes} {
		if err := c.resolveFileRef(n); err != nil {
			return err
		}
	}
	in, err := c.rawInput()
	if err != nil {
		return err
	}
	if c.file.Kind == "snapshot" {
		c.input = in
		return nil
	}
	var obj any
	if err := yaml.Unmarshal(in, &obj); err != nil {
		return fmt.Errorf("input is not YAML/JSON: %w", err)
	}
	if c.input, err = json.Marshal(obj); err != nil {
		return fmt.Errorf("input cannot be rendered as JSON: %w", err)
	}
	return nil
}

// resolveFileRef replaces a one-line string naming a file (relative to the
// case folder, or to a parent folder such as the corpus root) with the
// file's YAML/JSON content.
func (c *testCase) resolveFileRef(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || strings.Contains(n.Value, "\n") {
		return nil
	}
	for dir := c.dir; ; dir = filepath.Dir(dir) {
		b, err := os.ReadFile(filepath.Join(dir, n.Value))
		if err == nil {
			var doc yaml.Node
			if err := yaml.Unmarshal(b, &doc); err != nil {
				return fmt.Errorf("%s: %w", n.Value, err)
			}
			if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
				*n = *doc.Content[0]
			}
			return nil
		}
		if parent := filepath.Dir(dir); parent == dir || !strings.HasPrefix(filepath.Clean(dir), filepath.Clean(c.root)) {
			return fmt.Errorf("file %q not found from %s", n.Value, c.dir)
		}
	}
}

// rawInput returns the case's input bytes: a file named by inputFile or by a
// one-line input string, a multi-line string as is, or a mapping re-encoded.
func (c *testCase) rawInput() ([]byte, error) {
	if c.file.InputFile != "" {
		return os.ReadFile(filepath.Join(c.dir, c.file.InputFile))
	}
	n := &c.file.Input
	switch n.Kind {
	case 0:
		for _, name := range []string{"input.yaml", "input.json", "snapshot.yaml", "snapshot.json"} {
			if b, err := os.ReadFile(filepath.Join(c.dir, name)); err == nil {
				return b, nil
			}
		}
		return nil, errors.New("no input")
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "\n") {
			if b, err := os.ReadFile(filepath.Join(c.dir, n.Value)); err == nil {
				return b, nil
			}
		}
		return []byte(n.Value), nil
	default:
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(n); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
}

func (e expectation) allowed() (bool, error) {
	switch strings.ToLower(e.Verdict) {
	case "allowed", "allow", "accepted", "accept", "valid", "pass", "ok":
		return true, nil
	case "denied", "deny", "rejected", "reject", "invalid", "fail":
		return false, nil
	}
	return false, fmt.Errorf("unknown expected verdict %q", e.Verdict)
}

// ---- environment ----

type environment struct {
	work                   string
	port, healthPort       int
	base                   string
	caFile                 string
	readerToken, writerTok string
	readerCert, readerKey  string
	writerCert, writerKey  string
	configPath             string
	bearerClient           *http.Client // reader/writer over bearer
	writerMTLS, readerMTLS *http.Client
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "CERTS_QUIET=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func setup(work, certs string, cases []*testCase) (*environment, error) {
	e := &environment{work: work}
	pki := filepath.Join(work, "pki")
	ca, key := filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key")
	steps := [][]string{
		{filepath.Join(certs, "make-ca.sh"), "--out", pki},
		{filepath.Join(certs, "make-server-cert.sh"), "--ca-cert", ca, "--ca-key", key, "--out", pki,
			"--dns", "localhost", "--ip", "127.0.0.1", "--days", "2"},
		{filepath.Join(certs, "make-client-cert.sh"), "--ca-cert", ca, "--ca-key", key, "--out", pki,
			"--name", "reader", "--cn", "conformance-reader", "--days", "2"},
		{filepath.Join(certs, "make-client-cert.sh"), "--ca-cert", ca, "--ca-key", key, "--out", pki,
			"--name", "writer", "--cn", "conformance-writer", "--days", "2"},
	}
	for _, s := range steps {
		if err := run("bash", s...); err != nil {
			return nil, err
		}
	}
	e.caFile = ca
	e.readerCert, e.readerKey = filepath.Join(pki, "reader.crt"), filepath.Join(pki, "reader.key")
	e.writerCert, e.writerKey = filepath.Join(pki, "writer.crt"), filepath.Join(pki, "writer.key")
	e.readerToken, e.writerTok = filepath.Join(work, "reader.token"), filepath.Join(work, "writer.token")
	for _, f := range []string{e.readerToken, e.writerTok} {
		if err := os.WriteFile(f, []byte(randomToken()+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	var err error
	if e.port, err = freePort(); err != nil {
		return nil, err
	}
	if e.healthPort, err = freePort(); err != nil {
		return nil, err
	}
	e.base = fmt.Sprintf("https://127.0.0.1:%d", e.port)

	var invs []map[string]any
	// An inventory for the admission-only corpus keeps the configuration
	// valid (topogate needs at least one).
	if err := os.MkdirAll(filepath.Join(work, "sources"), 0o700); err != nil {
		return nil, err
	}
	nodesDir := filepath.Join(work, "nodes")
	_ = os.MkdirAll(nodesDir, 0o700)
	haveSnapshot := false
	for _, c := range cases {
		if c.err != nil || c.file.Kind != "snapshot" {
			continue
		}
		src, levels, prefix, err := sourceObject(c)
		if err != nil {
			c.err = err
			continue
		}
		c.levels, c.prefix = levels, prefix
		srcPath := filepath.Join(work, "sources", c.inv+".yaml")
		if err := os.WriteFile(srcPath, src, 0o600); err != nil {
			return nil, err
		}
		nodesPath := ""
		if c.file.Nodes.Kind != 0 {
			nl, err := nodeList(&c.file.Nodes)
			if err != nil {
				c.err = err
				continue
			}
			nodesPath = filepath.Join(nodesDir, c.inv+".json")
			if err := os.WriteFile(nodesPath, nl, 0o600); err != nil {
				return nil, err
			}
		}
		for _, variant := range []string{"b", "m"} {
			inv := map[string]any{
				"name":            c.inv + "-" + variant,
				"source":          srcPath,
				"allowEmptyStart": true,
			}
			if nodesPath != "" {
				inv["nodes"] = nodesPath
			}
			if variant == "b" {
				inv["readers"] = map[string]any{"bearerTokenFiles": []string{e.readerToken}}
				inv["writers"] = map[string]any{"bearerTokenFiles": []string{e.writerTok}}
			} else {
				inv["readers"] = map[string]any{"clientCAFile": ca, "allowedSubjects": []string{"conformance-reader"}}
				inv["writers"] = map[string]any{"clientCAFile": ca, "allowedSubjects": []string{"conformance-writer"}}
			}
			invs = append(invs, inv)
		}
		haveSnapshot = true
	}
	if !haveSnapshot {
		src := filepath.Join(work, "sources", "placeholder.yaml")
		_ = os.WriteFile(src, []byte(placeholderSource), 0o600)
		invs = append(invs, map[string]any{
			"name": "placeholder", "source": src, "allowEmptyStart": true,
			"readers": map[string]any{"bearerTokenFiles": []string{e.readerToken}},
			"writers": map[string]any{"bearerTokenFiles": []string{e.writerTok}},
		})
	}
	cfg := map[string]any{
		"listen": map[string]any{"address": "127.0.0.1", "port": e.port, "healthPort": e.healthPort},
		"tls": map[string]any{"certFile": filepath.Join(pki, "server.crt"),
			"keyFile": filepath.Join(pki, "server.key")},
		"admission":   map[string]any{"workerNamespace": "gpustack-system"},
		"store":       map[string]any{"type": "file", "directory": filepath.Join(work, "store")},
		"inventories": invs,
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	e.configPath = filepath.Join(work, "config.yaml")
	if err := os.WriteFile(e.configPath, out, 0o600); err != nil {
		return nil, err
	}
	if e.bearerClient, err = consumer.NewClient(consumer.Credentials{CAFile: ca, TokenFile: e.readerToken}, 30*time.Second); err != nil {
		return nil, err
	}
	if e.writerMTLS, err = consumer.NewClient(consumer.Credentials{CAFile: ca, CertFile: e.writerCert, KeyFile: e.writerKey}, 30*time.Second); err != nil {
		return nil, err
	}
	if e.readerMTLS, err = consumer.NewClient(consumer.Credentials{CAFile: ca, CertFile: e.readerCert, KeyFile: e.readerKey}, 30*time.Second); err != nil {
		return nil, err
	}
	return e, nil
}

const placeholderSource = `apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: placeholder}
spec:
  levels: [topology.gpustack.ai/rack]
  # A writing source: an inventory with writers may not feed a nodeLabels source.
  webhook:
    url: https://placeholder.invalid/snapshot
    pollInterval: 1m
    timeout: 10s
    maxStaleness: 5m
    bearerTokenSecretRef: {namespace: gpustack-system, name: placeholder}
`

// sourceObject renders the case's TopologySource as a file topogate loads.
// A bare spec is wrapped; a spec without an inventory path gets a webhook
// block (the path topogate serves), which is what feeds a pushed snapshot.
func sourceObject(c *testCase) ([]byte, []string, string, error) {
	var obj map[string]any
	if c.file.Source.Kind == 0 {
		return nil, nil, "", errors.New("snapshot case without source")
	}
	if err := c.file.Source.Decode(&obj); err != nil {
		return nil, nil, "", fmt.Errorf("source: %w", err)
	}
	if _, ok := obj["spec"]; !ok {
		obj = map[string]any{"spec": obj}
	}
	obj["apiVersion"] = "worker.gpustack.ai/v1"
	obj["kind"] = "TopologySource"
	obj["metadata"] = map[string]any{"name": c.inv}
	spec, _ := obj["spec"].(map[string]any)
	if spec == nil {
		return nil, nil, "", errors.New("source.spec is not a mapping")
	}
	_, a := spec["nodeLabels"]
	_, b := spec["configMap"]
	_, w := spec["webhook"]
	if !a && !b && !w {
		spec["webhook"] = map[string]any{
			"url": "https://topogate.gpustack-system.svc/snapshots/" + c.inv, "pollInterval": "1m",
			"timeout": "10s", "maxStaleness": "5m",
			"bearerTokenSecretRef": map[string]any{"namespace": "gpustack-system", "name": "topogate-reader"},
		}
	}
	var levels []string
	if l, ok := spec["levels"].([]any); ok {
		for _, v := range l {
			levels = append(levels, fmt.Sprint(v))
		}
	}
	prefix, _ := spec["additionalWritePrefix"].(string)
	out, err := yaml.Marshal(obj)
	return out, levels, prefix, err
}

// nodeList renders the case's Nodes in `kubectl get nodes -o json` form.
func nodeList(n *yaml.Node) ([]byte, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	item := func(name string, labels any) map[string]any {
		if labels == nil {
			labels = map[string]any{}
		}
		return map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": name, "labels": labels}}
	}
	var items []any
	switch t := v.(type) {
	case map[string]any:
		if it, ok := t["items"]; ok {
			items, _ = it.([]any)
		} else {
			for name, labels := range t {
				items = append(items, item(name, labels))
			}
		}
	case []any:
		for _, x := range t {
			switch y := x.(type) {
			case string:
				items = append(items, item(y, nil))
			case map[string]any:
				if _, ok := y["metadata"]; ok {
					items = append(items, y)
				} else {
					items = append(items, item(fmt.Sprint(y["name"]), y["labels"]))
				}
			}
		}
	default:
		return nil, errors.New("nodes: unsupported form")
	}
	if items == nil {
		items = []any{}
	}
	return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "NodeList", "items": items})
}

// ---- topogate process ----

type server struct {
	cmd     *exec.Cmd
	logPath string
	done    chan error
}

func startTopogate(binary string, e *environment) (*server, error) {
	logPath := filepath.Join(e.work, "topogate.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, "serve", "--config", e.configPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, logPath: logPath, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait(); logf.Close() }()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-s.done:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("topogate exited during start-up: %v\n%s", err, tail(log, 3000))
		default:
		}
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", e.healthPort))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			_ = s.stop()
			return nil, errors.New("topogate not ready after 60 s; log: " + logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and expects a clean exit (SPEC: SIGTERM drains, then exits).
func (s *server) stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			return fmt.Errorf("exit after SIGTERM: %v", err)
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New("did not exit within 30 s of SIGTERM")
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// ---- admission cases ----

var ruleRe = regexp.MustCompile(`\[([A-Z][0-9]+)\]`)

func runAdmission(e *environment, c *testCase) error {
	want, err := c.file.Expect.allowed()
	if err != nil {
		return err
	}
	var meta struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		APIVersion string `json:"apiVersion"`
	}
	_ = json.Unmarshal(c.input, &meta)
	version := "v1"
	if i := strings.LastIndex(meta.APIVersion, "/"); i >= 0 {
		version = meta.APIVersion[i+1:]
	}
	kind, plural, ns := "TopologySource", "topologysources", ""
	if c.file.Kind == "modeldeployment" {
		kind, plural, ns = "ModelDeployment", "modeldeployments", meta.Metadata.Namespace
		if ns == "" {
			ns = "default"
		}
	}
	uid := "conformance-" + randomToken()[:16]
	req := map[string]any{
		"uid":         uid,
		"kind":        map[string]string{"group": "worker.gpustack.ai", "version": version, "kind": kind},
		"resource":    map[string]string{"group": "worker.gpustack.ai", "version": version, "resource": plural},
		"operation":   c.file.Operation,
		"name":        meta.Metadata.Name,
		"object":      json.RawMessage(c.input),
		"userInfo":    map[string]any{"username": "conformance"},
		"dryRun":      false,
		"requestKind": map[string]string{"group": "worker.gpustack.ai", "version": version, "kind": kind},
	}
	if ns != "" {
		req["namespace"] = ns
	}
	if c.file.Operation == "DELETE" {
		req["oldObject"] = json.RawMessage(c.input)
		delete(req, "object")
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	hreq, _ := http.NewRequest(http.MethodPost, e.base+"/validate/"+plural+"?timeout=10s", bytes.NewReader(body))
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := e.bearerClient.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, rb)
	}
	var review struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Response   struct {
			UID      string   `json:"uid"`
			Allowed  bool     `json:"allowed"`
			Warnings []string `json:"warnings"`
			Status   struct {
				Code    int    `json:"code"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
				Details struct {
					Causes []struct {
						Reason  string `json:"reason"`
						Message string `json:"message"`
						Field   string `json:"field"`
					} `json:"causes"`
				} `json:"details"`
			} `json:"status"`
		} `json:"response"`
	}
	if err := json.Unmarshal(rb, &review); err != nil {
		return fmt.Errorf("response is not an AdmissionReview: %v", err)
	}
	r := review.Response
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" || r.UID != uid {
		return fmt.Errorf("envelope: apiVersion %q kind %q uid %q (sent %q)", review.APIVersion, review.Kind, r.UID, uid)
	}
	if r.Allowed != want {
		return fmt.Errorf("allowed=%v, want %v; message: %s", r.Allowed, want, r.Status.Message)
	}
	var got []string
	if !r.Allowed {
		if r.Status.Code != 422 || r.Status.Reason != "Invalid" {
			return fmt.Errorf("denial status %d %q, want 422 Invalid", r.Status.Code, r.Status.Reason)
		}
		for _, cause := range r.Status.Details.Causes {
			if m := ruleRe.FindStringSubmatch(cause.Message); m != nil {
				got = append(got, m[1])
			}
		}
		// Every field error must be in the message kubectl shows.
		for _, cause := range r.Status.Details.Causes {
			if cause.Field != "" && !strings.Contains(r.Status.Message, cause.Field) {
				return fmt.Errorf("field %s missing from the message: %s", cause.Field, r.Status.Message)
			}
		}
	}
	if err := compareRules(c.file.Expect.Rules, got); err != nil {
		return fmt.Errorf("%v; message: %s", err, r.Status.Message)
	}
	for _, e := range c.file.Expect.Errors {
		reason, ok := causeReasons[e.Type]
		if !ok {
			return fmt.Errorf("expect.errors: unknown type %q", e.Type)
		}
		found := false
		for _, cause := range r.Status.Details.Causes {
			found = found || (cause.Field == e.Path && cause.Reason == reason)
		}
		if !found {
			return fmt.Errorf("no %s at %s; message: %s", e.Type, e.Path, r.Status.Message)
		}
	}
	for _, w := range r.Warnings {
		if len(w) > 120 || strings.ContainsFunc(w, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("warning breaks the apiserver's limits: %q", w)
		}
	}
	return compareWarnings(&c.file.Expect.Warnings, r.Warnings)
}

func compareRules(want, got []string) error {
	if len(want) == 0 {
		return nil
	}
	w := map[string]bool{}
	for _, r := range want {
		w[r] = true
	}
	g := map[string]bool{}
	for _, r := range got {
		g[r] = true
	}
	if !reflect.DeepEqual(w, g) {
		return fmt.Errorf("rules %v, want %v", keys(g), keys(w))
	}
	return nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// compareWarnings: a number is the exact count; a list holds substrings each
// warning set must contain (case-insensitive); true means at least one.
func compareWarnings(spec *yaml.Node, got []string) error {
	if spec.Kind == 0 {
		return nil
	}
	var n int
	if spec.Decode(&n) == nil && spec.Tag == "!!int" {
		if len(got) != n {
			return fmt.Errorf("%d warnings %q, want %d", len(got), got, n)
		}
		return nil
	}
	var b bool
	if spec.Decode(&b) == nil && spec.Tag == "!!bool" {
		if b != (len(got) > 0) {
			return fmt.Errorf("warnings %q, want any=%v", got, b)
		}
		return nil
	}
	var subs []string
	if err := spec.Decode(&subs); err != nil {
		return fmt.Errorf("expect.warnings: %v", err)
	}
	if len(subs) == 0 && len(got) > 0 {
		return fmt.Errorf("warnings %q, want none", got)
	}
	all := strings.ToLower(strings.Join(got, "\n"))
	for _, s := range subs {
		if !strings.Contains(all, strings.ToLower(s)) {
			return fmt.Errorf("no warning mentions %q (got %q)", s, got)
		}
	}
	return nil
}

// ---- nodelabels cases ----

// runNodeLabels checks a nodeLabels source's hierarchy over the case's Nodes (the input) with
// `topogate validate nodelabels --output json`: the verdict, the rules, the errors the
// consumer reports and every Node's profile id.
func runNodeLabels(binary string, c *testCase) error {
	want, err := c.file.Expect.allowed()
	if err != nil {
		return err
	}
	if c.file.Source.Kind == 0 {
		return errors.New("nodelabels case without source")
	}
	dir, err := os.MkdirTemp("", "topogate-nodelabels-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var source any
	if err := c.file.Source.Decode(&source); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	sourceJSON, err := json.Marshal(source)
	if err != nil {
		return err
	}
	sourcePath, nodesPath := filepath.Join(dir, "source.json"), filepath.Join(dir, "nodes.json")
	if err := os.WriteFile(sourcePath, sourceJSON, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(nodesPath, c.input, 0o600); err != nil {
		return err
	}
	out, err := exec.Command(binary, "validate", "nodelabels", "--source", sourcePath, "--nodes", nodesPath,
		"--output", "json").Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return err
	}
	var report struct {
		Valid  bool `json:"valid"`
		Errors []struct {
			Rule  string `json:"rule"`
			Field string `json:"field"`
			Type  string `json:"type"`
		} `json:"errors"`
		Nodes []struct {
			Name    string `json:"name"`
			Profile string `json:"profile"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		return fmt.Errorf("validate nodelabels: %v: %s", err, out)
	}
	if report.Valid != want {
		return fmt.Errorf("valid=%v, want %v: %s", report.Valid, want, out)
	}
	var rules []string
	for _, e := range report.Errors {
		rules = append(rules, e.Rule)
	}
	if err := compareRules(c.file.Expect.Rules, rules); err != nil {
		return err
	}
	for _, e := range c.file.Expect.Errors {
		found := false
		for _, g := range report.Errors {
			found = found || (g.Field == e.Path && g.Type == e.Type)
		}
		if !found {
			return fmt.Errorf("no %s at %s: %s", e.Type, e.Path, out)
		}
	}
	got := map[string]string{}
	for _, n := range report.Nodes {
		got[n.Name] = n.Profile
	}
	for node, id := range c.file.Expect.Profiles {
		if got[node] != id {
			return fmt.Errorf("node %s: profile %q, want %q", node, got[node], id)
		}
	}
	return nil
}

// ---- snapshot cases ----

func runSnapshot(e *environment, c *testCase) error {
	want, err := c.file.Expect.allowed()
	if err != nil {
		return err
	}
	ctype := "application/yaml"
	if t := bytes.TrimSpace(c.input); len(t) > 0 && t[0] == '{' {
		ctype = "application/json"
	}
	status, body, err := put(e, e.bearerClient, c.inv+"-b", c.input, ctype, e.writerTok)
	if err != nil {
		return err
	}
	if !want {
		// A push body over 1 MiB is refused by the route's body limit with 413
		// before it is parsed (SPEC H2 / S10); that is the expected S10 answer.
		if status == 413 && len(c.input) > consumer.MaxBody && reflect.DeepEqual(c.file.Expect.Rules, []string{"S10"}) {
			return nil
		}
		if status != 422 {
			return fmt.Errorf("PUT answered %d, want 422: %s", status, tail(body, 400))
		}
		if err := compareRules(c.file.Expect.Rules, rulesIn(body)); err != nil {
			return fmt.Errorf("%v: %s", err, tail(body, 600))
		}
		// Nothing was published: the inventory started empty and must stay so.
		st, _, err := get(e.bearerClient, e.base+"/snapshots/"+c.inv+"-b", e.readerToken, "")
		if err != nil {
			return err
		}
		if st != 503 {
			return fmt.Errorf("after a rejected push GET answered %d, want 503", st)
		}
		return nil
	}
	if status != 200 && status != 201 {
		return fmt.Errorf("PUT answered %d, want 200/201: %s", status, tail(body, 600))
	}
	expected, err := consumer.Decode(c.input)
	if err != nil {
		return fmt.Errorf("the consumer cannot decode the case input itself: %v", err)
	}
	// The same revision over mTLS, pushed by the mTLS writer.
	if status, body, err = put(e, e.writerMTLS, c.inv+"-m", c.input, ctype, ""); err != nil {
		return err
	} else if status != 200 && status != 201 {
		return fmt.Errorf("mTLS PUT answered %d: %s", status, tail(body, 600))
	}
	for _, accept := range []string{"", "application/yaml"} {
		st, b, err := get(e.bearerClient, e.base+"/snapshots/"+c.inv+"-b", e.readerToken, accept)
		if err != nil {
			return err
		}
		if st != 200 {
			return fmt.Errorf("GET (Accept %q) answered %d: %s", accept, st, tail(b, 400))
		}
		served, err := consumer.Decode(b)
		if err != nil {
			return fmt.Errorf("served body (Accept %q) refused by the consumer decoder: %v", accept, err)
		}
		if served.Revision != expected.Revision || !sameNodes(served.Nodes, expected.Nodes) {
			return fmt.Errorf("served (Accept %q) revision %q nodes %v, pushed %q %v", accept,
				served.Revision, served.Nodes, expected.Revision, expected.Nodes)
		}
	}
	// The consumer-faithful reader, exactly as GPUStack polls: bearer and mTLS.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, via := range []struct {
		name   string
		client *http.Client
		creds  consumer.Credentials
		inv    string
	}{
		{"bearer", e.bearerClient, consumer.Credentials{CAFile: e.caFile, TokenFile: e.readerToken}, c.inv + "-b"},
		{"mTLS", e.readerMTLS, consumer.Credentials{CAFile: e.caFile, CertFile: e.readerCert, KeyFile: e.readerKey}, c.inv + "-m"},
	} {
		b, err := consumer.Fetch(ctx, via.client, e.base+"/snapshots/"+via.inv, via.creds)
		if err != nil {
			return fmt.Errorf("consumer reader over %s: %v", via.name, err)
		}
		s, err := consumer.Decode(b)
		if err != nil {
			return fmt.Errorf("consumer reader over %s: %v", via.name, err)
		}
		if v := consumer.Check(s, c.levels, c.prefix); len(v) > 0 {
			return fmt.Errorf("consumer reader over %s refuses the served snapshot: %v", via.name, v)
		}
	}
	return nil
}

func sameNodes(a, b map[string]map[string]string) bool {
	norm := func(m map[string]map[string]string) map[string]map[string]string {
		out := map[string]map[string]string{}
		for k, v := range m {
			if v == nil {
				v = map[string]string{}
			}
			out[k] = v
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func put(e *environment, client *http.Client, inv string, body []byte, ctype, tokenFile string) (int, []byte, error) {
	req, _ := http.NewRequest(http.MethodPut, e.base+"/snapshots/"+inv, bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	if tokenFile != "" {
		tok, err := os.ReadFile(tokenFile)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func get(client *http.Client, url, tokenFile, accept string) (int, []byte, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// rulesIn collects rule ids from a 422 body: "rule" members anywhere in the
// JSON, and "[RULE]" prefixes of cause messages.
func rulesIn(body []byte) []string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case map[string]any:
			for k, y := range t {
				if s, ok := y.(string); ok && k == "rule" {
					out = append(out, s)
				} else if ok && (k == "message") && len(t) > 0 {
					if _, isCause := t["field"]; isCause {
						if m := ruleRe.FindStringSubmatch(s); m != nil {
							out = append(out, m[1])
						}
					}
				}
				walk(y)
			}
		case []any:
			for _, y := range t {
				walk(y)
			}
		}
	}
	walk(v)
	return out
}
