// Command yamldiff compares topogate's verdict on snapshot texts with the reader's. Each
// file is decoded as GPUStack's webhook reader decodes a snapshot (strict gopkg.in/yaml.v3:
// internal/consumer) and checked with the reader's rules, and validated by
// `topogate validate snapshot FILE --source SOURCE`. Every file where the verdicts differ
// is printed; a difference that comes only from rules the reader's check does not make
// (S3, S6) is counted apart. Exit status 1 when any other difference is found.
//
// A tool for inspecting fuzz corpora, not a CI stage (a fresh corpus may hold a difference
// nobody has looked at yet; test/fixtures/yaml_v3_verdicts.json keeps the ones found):
//
//	go run ./yamldiff --topogate ../build/dev/cli/topogate \
//	    --source cases/sources/data-center.yaml ../build/fuzz/corpus/fuzz_snapshot
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"topogate.invalid/conformance/internal/consumer"
)

var ruleLine = regexp.MustCompile(`(?m)^\[(S\d+)\] `)

func main() {
	bin := flag.String("topogate", "", "the topogate binary")
	source := flag.String("source", "", "the TopologySource the snapshots feed (YAML)")
	show := flag.Int("show", 20, "differences to print")
	flag.Parse()
	if *bin == "" || *source == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: yamldiff --topogate BIN --source TOPOLOGYSOURCE DIR...")
		os.Exit(2)
	}
	levels, prefix, err := readSource(*source)
	if err != nil {
		fmt.Fprintln(os.Stderr, "yamldiff:", err)
		os.Exit(2)
	}
	var files []string
	for _, dir := range flag.Args() {
		found, err := filepath.Glob(filepath.Join(dir, "*"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "yamldiff:", err)
			os.Exit(2)
		}
		files = append(files, found...)
	}
	sort.Strings(files)
	total, differ, outside := 0, 0, 0
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil || len(body) > consumer.MaxBody {
			continue // a directory, or past the reader's size limit (S10, checked elsewhere)
		}
		total++
		readerValid := false
		var why string
		if s, err := consumer.Decode(body); err != nil {
			why = err.Error()
		} else if v := consumer.Check(s, levels, prefix); len(v) > 0 {
			why = v[0].String()
		} else {
			readerValid = true
		}
		out, err := exec.Command(*bin, "validate", "snapshot", f, "--source", *source).CombinedOutput()
		var exit *exec.ExitError
		if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
			fmt.Fprintf(os.Stderr, "yamldiff: %s: %v\n%s", f, err, out)
			os.Exit(2)
		}
		topogateValid := err == nil
		if readerValid == topogateValid {
			continue
		}
		rules := map[string]bool{}
		for _, m := range ruleLine.FindAllStringSubmatch(string(out), -1) {
			rules[m[1]] = true
		}
		if readerValid && len(rules) > 0 && onlyOutsideReader(rules) {
			outside++
			continue
		}
		differ++
		if differ <= *show {
			fmt.Printf("%s\n  reader: valid=%v %s\n  topogate: valid=%v %s\n", f, readerValid, why, topogateValid,
				strings.TrimSpace(firstLines(string(out), 3)))
		}
	}
	fmt.Printf("%d texts: %d verdicts differ, %d more only by rules the reader's check does not make (S3, S6)\n",
		total, differ, outside)
	if differ > 0 {
		os.Exit(1)
	}
}

func onlyOutsideReader(rules map[string]bool) bool {
	for r := range rules {
		if r != "S3" && r != "S6" {
			return false
		}
	}
	return true
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n  ")
}

// readSource reads spec.levels and spec.additionalWritePrefix of a TopologySource file.
func readSource(path string) ([]string, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var obj struct {
		Spec struct {
			Levels                []string `yaml:"levels"`
			AdditionalWritePrefix string   `yaml:"additionalWritePrefix"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	if len(obj.Spec.Levels) == 0 {
		return nil, "", fmt.Errorf("%s: no spec.levels", path)
	}
	return obj.Spec.Levels, obj.Spec.AdditionalWritePrefix, nil
}
