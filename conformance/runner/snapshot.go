package main

// Snapshot cases: PUT, then the served revision read back by the consumer.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"time"

	"topogate.invalid/conformance/internal/consumer"
)

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
	return send(client, req, tokenFile)
}

func get(client *http.Client, url, tokenFile, accept string) (int, []byte, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return send(client, req, tokenFile)
}

// send makes the request with the bearer token in tokenFile (none when it is "") and
// returns the status and the body.
func send(client *http.Client, req *http.Request, tokenFile string) (int, []byte, error) {
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
