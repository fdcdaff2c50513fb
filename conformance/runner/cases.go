package main

// The case corpus: case.yaml files, their expectations and inputs.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
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
