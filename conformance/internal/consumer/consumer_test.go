package consumer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const valid = `apiVersion: topology.gpustack.ai/v1alpha1
revision: inventory-42
nodes:
  worker-a: {topology.gpustack.ai/region: region-a, topology.gpustack.ai/zone: zone-a, topology.gpustack.ai/rack: rack-01}
  worker-b: {topology.gpustack.ai/region: region-a, topology.gpustack.ai/zone: zone-a, topology.gpustack.ai/rack: rack-02}
`

var levels = []string{"topology.gpustack.ai/region", "topology.gpustack.ai/zone", "topology.gpustack.ai/rack"}

func rules(v []Violation) string {
	var out []string
	for _, x := range v {
		out = append(out, x.Rule)
	}
	return strings.Join(out, ",")
}

func TestDecodeStrict(t *testing.T) {
	cases := []struct {
		name, body string
		ok         bool
	}{
		{"valid", valid, true},
		{"json", `{"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"r","nodes":{"a":{"k":"01"}}}`, true},
		{"trailing dots", valid + "...\n", true},
		{"unknown field", valid + "extra: 1\n", false},
		{"unknown node field type", "apiVersion: x\nrevision: r\nnodes: [a]\n", false},
		{"second document", valid + "---\n", false},
		{"empty", "", false},
		{"comment only", "# nothing\n", false},
		{"duplicate key", "apiVersion: a\napiVersion: b\nrevision: r\n", false},
	}
	for _, c := range cases {
		_, err := Decode([]byte(c.body))
		if (err == nil) != c.ok {
			t.Errorf("%s: err=%v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestDecodeKeepsLiteralScalars(t *testing.T) {
	s, err := Decode([]byte("apiVersion: a\nrevision: r\nnodes:\n  n: {k1: 01, k2: 1.50, k3: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Nodes["n"]; got["k1"] != "01" || got["k2"] != "1.50" || got["k3"] != "true" {
		t.Errorf("scalars normalised: %v", got)
	}
}

func TestCheckRules(t *testing.T) {
	cases := []struct {
		name, body, prefix, want string
	}{
		{"valid", valid, "", ""},
		{"S1 apiVersion", strings.Replace(valid, "v1alpha1", "v1", 1), "", "S1"},
		{"S2 blank revision", strings.Replace(valid, "inventory-42", `" \u00a0"`, 1), "", "S2"},
		{"S4 undeclared and S5 unpublishable", "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n  n: {example.com/x: a}\n", "", "S4,S5"},
		{"S5 allowed by prefix", "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n  n: {topology.gpustack.ai/region: a, example.com/x: b}\n", "example.com/", "S4"},
		{"S5 profile", "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n  n: {topology.gpustack.ai/profile: a}\n", "", "S4,S5"},
		{"S7 empty value", "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n  n: {topology.gpustack.ai/region: ''}\n", "", "S7"},
		{"S7 64 chars", "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n  n: {topology.gpustack.ai/region: " + strings.Repeat("a", 64) + "}\n", "", "S7"},
		{"S7 63 chars", "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n  n: {topology.gpustack.ai/region: " + strings.Repeat("a", 63) + "}\n", "", ""},
		{"S8 missing parent", "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n  n: {topology.gpustack.ai/region: a, topology.gpustack.ai/rack: r}\n", "", "S8"},
		{"fine suffix omitted", "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n  n: {topology.gpustack.ai/region: a}\n", "", ""},
		{"S9 zone under two regions", strings.Replace(valid, "worker-b: {topology.gpustack.ai/region: region-a", "worker-b: {topology.gpustack.ai/region: region-b", 1), "", "S9"},
		{"same rack name under two zones", "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n  a: {topology.gpustack.ai/region: r, topology.gpustack.ai/zone: z1, topology.gpustack.ai/rack: x}\n  b: {topology.gpustack.ai/region: r, topology.gpustack.ai/zone: z2, topology.gpustack.ai/rack: x}\n", "", "S9"},
	}
	for _, c := range cases {
		s, err := Decode([]byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := rules(Check(s, levels, c.prefix)); got != c.want {
			t.Errorf("%s: rules %q, want %q", c.name, got, c.want)
		}
	}
}

// server starts a TLS server and writes its CA and a token to a temp folder.
func server(t *testing.T, h http.HandlerFunc) (*httptest.Server, Credentials) {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("secret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, Credentials{CAFile: ca, TokenFile: tok}
}

func fetch(t *testing.T, srv *httptest.Server, c Credentials, path string) ([]byte, error) {
	t.Helper()
	cl, err := NewClient(c, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return Fetch(context.Background(), cl, srv.URL+path, c)
}

func TestFetch(t *testing.T) {
	srv, creds := server(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret-token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write([]byte(valid))
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/created":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(valid))
		case "/exact":
			_, _ = w.Write([]byte(strings.Repeat("a", MaxBody)))
		case "/over":
			_, _ = w.Write([]byte(strings.Repeat("a", MaxBody+1)))
		}
	})
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1") // must be ignored
	if b, err := fetch(t, srv, creds, "/ok"); err != nil || string(b) != valid {
		t.Errorf("/ok: %v", err)
	}
	if _, err := fetch(t, srv, creds, "/redirect"); err == nil || !strings.Contains(err.Error(), "302") {
		t.Errorf("redirect followed or not reported: %v", err)
	}
	if _, err := fetch(t, srv, creds, "/created"); err == nil {
		t.Error("201 accepted; the reader wants exactly 200")
	}
	if _, err := fetch(t, srv, creds, "/exact"); err != nil {
		t.Errorf("exactly 1 MiB refused: %v", err)
	}
	if _, err := fetch(t, srv, creds, "/over"); err == nil {
		t.Error("1 MiB + 1 accepted")
	}
	wrong := creds
	wrong.TokenFile = filepath.Join(t.TempDir(), "t")
	_ = os.WriteFile(wrong.TokenFile, []byte("other"), 0o600)
	if _, err := fetch(t, srv, wrong, "/ok"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong token: %v", err)
	}
}

func TestClientNeedsExactlyOneCredential(t *testing.T) {
	_, creds := server(t, func(http.ResponseWriter, *http.Request) {})
	none := Credentials{CAFile: creds.CAFile}
	if _, err := NewClient(none, time.Second); err == nil {
		t.Error("no credential accepted")
	}
	both := Credentials{CAFile: creds.CAFile, TokenFile: creds.TokenFile, CertFile: "x", KeyFile: "y"}
	if _, err := NewClient(both, time.Second); err == nil {
		t.Error("two credentials accepted")
	}
}

func TestUntrustedServerRefused(t *testing.T) {
	srv, creds := server(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(valid)) })
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	creds.CAFile = filepath.Join(t.TempDir(), "ca.crt")
	_ = os.WriteFile(creds.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	if _, err := fetch(t, srv, creds, "/"); err == nil {
		t.Error("server with a certificate from another CA accepted")
	}
}
