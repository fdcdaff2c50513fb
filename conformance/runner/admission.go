package main

// Admission cases: the input in an AdmissionReview, its verdict, rules and warnings.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

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
