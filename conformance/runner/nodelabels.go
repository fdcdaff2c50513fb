package main

// nodeLabels cases: the Node-label inventory source.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

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
