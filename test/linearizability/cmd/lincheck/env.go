package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// pki is the harness's own CA and one serving certificate for 127.0.0.1, used by the
// replicas' listeners and by the fault proxies.
type pki struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
	cert                      tls.Certificate
}

func makePKI(dir string) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "topogate linearizability CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(48 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(48 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	p := &pki{
		caFile:   filepath.Join(dir, "ca.crt"),
		certFile: filepath.Join(dir, "server.crt"),
		keyFile:  filepath.Join(dir, "server.key"),
	}
	write := func(path, typ string, b []byte) error {
		return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600)
	}
	if err := write(p.caFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	if err := write(p.certFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := write(p.keyFile, "EC PRIVATE KEY", keyDER); err != nil {
		return nil, err
	}
	p.pool = x509.NewCertPool()
	p.pool.AddCert(caCert)
	p.cert, err = tls.LoadX509KeyPair(p.certFile, p.keyFile)
	return p, err
}

func randomToken(path string) error {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(hex.EncodeToString(b)), 0o600)
}

// controlPlane is what control-plane.sh's env and state folder say.
type controlPlane struct {
	url, caFile, tokenFile, dir, script string
	token                               string
	tlsConfig                           *tls.Config
	client                              *http.Client // short calls
	streamClient                        *http.Client // watches
	etcdURL                             string
}

func loadControlPlane(script string) (*controlPlane, error) {
	cp := &controlPlane{
		url:       os.Getenv("TOPOGATE_CP_URL"),
		caFile:    os.Getenv("TOPOGATE_CP_CA"),
		tokenFile: os.Getenv("TOPOGATE_CP_ADMIN_TOKEN_FILE"),
		dir:       os.Getenv("TOPOGATE_CP_DIR"),
		script:    script,
	}
	if cp.url == "" || cp.caFile == "" || cp.tokenFile == "" || cp.dir == "" {
		return nil, fmt.Errorf("TOPOGATE_CP_URL, TOPOGATE_CP_CA, TOPOGATE_CP_ADMIN_TOKEN_FILE and TOPOGATE_CP_DIR must be set (eval \"$(test/e2e/control-plane.sh env)\")")
	}
	tok, err := os.ReadFile(cp.tokenFile)
	if err != nil {
		return nil, err
	}
	cp.token = strings.TrimSpace(string(tok))
	ca, err := os.ReadFile(cp.caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no certificate", cp.caFile)
	}
	cp.tlsConfig = &tls.Config{RootCAs: pool}
	cp.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cp.tlsConfig}}
	cp.streamClient = &http.Client{Transport: &http.Transport{TLSClientConfig: cp.tlsConfig}}
	port, err := os.ReadFile(filepath.Join(cp.dir, "etcd.port"))
	if err != nil {
		return nil, fmt.Errorf("etcd port: %w", err)
	}
	cp.etcdURL = "http://127.0.0.1:" + strings.TrimSpace(string(port))
	return cp, nil
}

func (cp *controlPlane) do(ctx context.Context, method, path, contentType string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, cp.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+cp.token)
	if body != nil {
		if contentType == "" {
			contentType = "application/json"
		}
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := cp.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// pid reads one of control-plane.sh's pid files (etcd, apiserver).
func (cp *controlPlane) pid(name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(cp.dir, name+".pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// etcdCompact compacts etcd at its current revision through its v3 JSON gateway.
func (cp *controlPlane) etcdCompact() (int64, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	key := base64.StdEncoding.EncodeToString([]byte("/"))
	resp, err := c.Post(cp.etcdURL+"/v3/kv/range", "application/json",
		strings.NewReader(`{"key":"`+key+`","limit":1}`))
	if err != nil {
		return 0, err
	}
	var r struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	err = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(r.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd range: revision %q", r.Header.Revision)
	}
	resp, err = c.Post(cp.etcdURL+"/v3/kv/compaction", "application/json",
		strings.NewReader(fmt.Sprintf(`{"revision":"%d","physical":true}`, rev)))
	if err != nil {
		return 0, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("etcd compaction: %d %s", resp.StatusCode, b)
	}
	return rev, nil
}

// ---- the inventory's ConfigMap

type storedCM struct {
	exists   bool
	rv       string
	revision string
}

type configMap struct {
	Metadata struct {
		Name            string            `json:"name"`
		ResourceVersion string            `json:"resourceVersion"`
		Annotations     map[string]string `json:"annotations"`
		Labels          map[string]string `json:"labels"`
	} `json:"metadata"`
	Data       map[string]string `json:"data"`
	BinaryData map[string]string `json:"binaryData"`
}

func revisionOf(cm *configMap) (string, error) {
	var raw []byte
	if s, ok := cm.Data["snapshot.json"]; ok {
		raw = []byte(s)
	} else if s, ok := cm.BinaryData["snapshot.json.gz"]; ok {
		gz, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "", err
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			return "", err
		}
		raw, err = io.ReadAll(zr)
		if err != nil {
			return "", err
		}
	} else {
		return "", fmt.Errorf("ConfigMap %s holds no snapshot", cm.Metadata.Name)
	}
	var snap struct {
		Revision string `json:"revision"`
	}
	if err := json.Unmarshal(raw, &snap); err != nil {
		return "", err
	}
	return snap.Revision, nil
}

func (cp *controlPlane) cmPath(ns, name string) string {
	return "/api/v1/namespaces/" + url.PathEscape(ns) + "/configmaps/" + url.PathEscape(name)
}

// readCM is the direct store read: no proxy, a quorum GET of the ConfigMap.
func (cp *controlPlane) readCM(ctx context.Context, ns, name string) (storedCM, error) {
	code, body, err := cp.do(ctx, "GET", cp.cmPath(ns, name), "", nil)
	if err != nil {
		return storedCM{}, err
	}
	if code == 404 {
		return storedCM{}, nil
	}
	if code != 200 {
		return storedCM{}, fmt.Errorf("GET ConfigMap: %d %s", code, truncate(string(body), 200))
	}
	var cm configMap
	if err := json.Unmarshal(body, &cm); err != nil {
		return storedCM{}, err
	}
	rev, err := revisionOf(&cm)
	if err != nil {
		return storedCM{}, err
	}
	return storedCM{exists: true, rv: cm.Metadata.ResourceVersion, revision: rev}, nil
}

// editCM writes a new revision into the ConfigMap by hand (as an operator with kubectl
// edit would), keeping its labels and recomputing the digest annotation.
func (cp *controlPlane) editCM(ctx context.Context, ns, name, snapshotJSON string) (int, error) {
	code, body, err := cp.do(ctx, "GET", cp.cmPath(ns, name), "", nil)
	if err != nil {
		return 0, err
	}
	if code != 200 {
		return code, nil
	}
	var cm map[string]any
	if err := json.Unmarshal(body, &cm); err != nil {
		return 0, err
	}
	meta := cm["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		meta["annotations"] = ann
	}
	sum := sha256.Sum256([]byte(snapshotJSON))
	ann["topogate.gpustack.ai/sha256"] = hex.EncodeToString(sum[:])
	ann["topogate.gpustack.ai/actor"] = "hand-edit"
	ann["topogate.gpustack.ai/accepted-at"] = time.Now().UTC().Format(time.RFC3339)
	delete(cm, "binaryData")
	cm["data"] = map[string]any{"snapshot.json": snapshotJSON}
	out, _ := json.Marshal(cm)
	code, _, err = cp.do(ctx, "PUT", cp.cmPath(ns, name), "", out)
	return code, err
}

func (cp *controlPlane) deleteCM(ctx context.Context, ns, name string) (int, error) {
	code, _, err := cp.do(ctx, "DELETE", cp.cmPath(ns, name), "", nil)
	return code, err
}

func (cp *controlPlane) ensureNamespace(ctx context.Context, ns string) error {
	code, body, err := cp.do(ctx, "POST", "/api/v1/namespaces", "",
		[]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+ns+`"}}`))
	if err != nil {
		return err
	}
	if code != 201 && code != 409 {
		return fmt.Errorf("create namespace %s: %d %s", ns, code, truncate(string(body), 200))
	}
	return nil
}

func (cp *controlPlane) createNode(ctx context.Context, name, pool string) (int, error) {
	code, _, err := cp.do(ctx, "POST", "/api/v1/nodes", "",
		[]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"`+name+`","labels":{"`+poolLabel+`":"`+pool+`"}}}`))
	return code, err
}

func (cp *controlPlane) labelNode(ctx context.Context, name, pool string) (int, error) {
	code, _, err := cp.do(ctx, "PATCH", "/api/v1/nodes/"+url.PathEscape(name), "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"`+poolLabel+`":"`+pool+`"}}}`))
	return code, err
}

func (cp *controlPlane) deleteNode(ctx context.Context, name string) {
	cp.do(ctx, "DELETE", "/api/v1/nodes/"+url.PathEscape(name), "", nil)
}

// ---- the harness's own watch of the ConfigMap: the store's order

type storeEvent struct {
	t        int64
	rv       int64
	revision string // "" = deleted
	via      string
}

type storeWatch struct {
	mu     sync.Mutex
	events []storeEvent
	relist int
}

func (w *storeWatch) add(e storeEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.events); n > 0 && w.events[n-1].rv >= e.rv && e.rv != 0 {
		return // already seen (a relist or a resumed watch repeats it)
	}
	w.events = append(w.events, e)
}

func (w *storeWatch) snapshot() []storeEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]storeEvent(nil), w.events...)
}

func (cp *controlPlane) watchStore(ctx context.Context, ns, name string, clock func() int64, w *storeWatch) {
	sel := "fieldSelector=" + url.QueryEscape("metadata.name="+name)
	base := "/api/v1/namespaces/" + url.PathEscape(ns) + "/configmaps?" + sel
	for ctx.Err() == nil {
		code, body, err := cp.do(ctx, "GET", base, "", nil)
		if err != nil || code != 200 {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		var list struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
			Items []configMap `json:"items"`
		}
		if json.Unmarshal(body, &list) != nil {
			continue
		}
		w.mu.Lock()
		w.relist++
		w.mu.Unlock()
		version := list.Metadata.ResourceVersion
		if len(list.Items) == 1 {
			rv, _ := strconv.ParseInt(list.Items[0].Metadata.ResourceVersion, 10, 64)
			if rev, err := revisionOf(&list.Items[0]); err == nil {
				w.add(storeEvent{clock(), rv, rev, "list"})
			}
		} else {
			rv, _ := strconv.ParseInt(version, 10, 64)
			w.mu.Lock()
			last := len(w.events) > 0 && w.events[len(w.events)-1].revision != ""
			w.mu.Unlock()
			if last {
				w.add(storeEvent{clock(), rv, "", "list"})
			}
		}
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", cp.url+base+"&watch=1&allowWatchBookmarks=true&timeoutSeconds=120&resourceVersion="+url.QueryEscape(version), nil)
			req.Header.Set("Authorization", "Bearer "+cp.token)
			resp, err := cp.streamClient.Do(req)
			if err != nil {
				sleepCtx(ctx, 200*time.Millisecond)
				break
			}
			if resp.StatusCode != 200 {
				resp.Body.Close()
				sleepCtx(ctx, 200*time.Millisecond)
				break
			}
			gone := false
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 4<<20)
			for sc.Scan() {
				var ev struct {
					Type   string          `json:"type"`
					Object json.RawMessage `json:"object"`
				}
				if json.Unmarshal(sc.Bytes(), &ev) != nil {
					continue
				}
				if ev.Type == "ERROR" {
					gone = true
					break
				}
				var cm configMap
				if json.Unmarshal(ev.Object, &cm) != nil {
					continue
				}
				version = cm.Metadata.ResourceVersion
				rv, _ := strconv.ParseInt(version, 10, 64)
				switch ev.Type {
				case "ADDED", "MODIFIED":
					if rev, err := revisionOf(&cm); err == nil {
						w.add(storeEvent{clock(), rv, rev, "watch"})
					}
				case "DELETED":
					w.add(storeEvent{clock(), rv, "", "watch"})
				}
			}
			resp.Body.Close()
			if gone {
				break
			}
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
