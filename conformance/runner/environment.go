package main

// The environment the cases run in: certificates, tokens, the generated
// configuration, and the topogate process.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"topogate.invalid/conformance/internal/consumer"
)

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
