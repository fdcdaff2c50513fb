package consumer

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"

	"gopkg.in/yaml.v3"
)

// The verdicts in test/fixtures/yaml_v3_verdicts.json are yaml.v3's own: each text is
// decoded as the reader decodes a snapshot (one document, a second one is an error), into a
// generic value. test/core/yaml_verdicts_test.cpp holds topogate's decoder to the same file.
func TestYamlV3Verdicts(t *testing.T) {
	raw, err := os.ReadFile("../../../test/fixtures/yaml_v3_verdicts.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Cases []struct {
			YAML     string `json:"yaml"`
			Accepted bool   `json:"accepted"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &fixture); err != nil {
		t.Fatal(err)
	}
	if len(fixture.Cases) < 50 {
		t.Fatalf("only %d cases", len(fixture.Cases))
	}
	for _, c := range fixture.Cases {
		dec := yaml.NewDecoder(bytes.NewReader([]byte(c.YAML)))
		var v interface{}
		err := dec.Decode(&v)
		if err == nil {
			var extra yaml.Node
			if e := dec.Decode(&extra); !errors.Is(e, io.EOF) {
				err = errors.New("more than one YAML document")
			}
		}
		if (err == nil) != c.Accepted {
			t.Errorf("%q: yaml.v3 accepted=%v (err %v), the fixture says %v", c.YAML, err == nil, err, c.Accepted)
		}
	}
}
