package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Operation kinds of the register.
const (
	opPut   = "put"   // PUT without If-Match
	opCAS   = "cas"   // PUT with If-Match
	opGet   = "get"   // GET on a named replica
	opRead  = "sread" // direct store read (the ConfigMap from the apiserver)
	opEdit  = "edit"  // the ConfigMap edited by hand
	opDel   = "del"   // the ConfigMap deleted by hand
	outOK   = "ok"
	outFail = "fail"    // 412: did not take effect
	outUnk  = "unknown" // 503, timeout, connection error: may take effect at any later time
)

type op struct {
	id      int
	client  int
	kind    string
	replica int    // -1: none
	value   string // revision written, or read ("" = none)
	expect  string // cas: the revision whose ETag was sent
	etag    string // cas: the ETag sent; get: the ETag answered
	status  int
	out     string
	err     string
	call    int64
	ret     int64
	ryw     int      // get: the id of this client's write it must see, else -1
	names   []string // write: the Nodes created during the run that its snapshot names
}

func (o *op) isWrite() bool {
	return o.kind == opPut || o.kind == opCAS || o.kind == opEdit || o.kind == opDel
}

func (o *op) String() string {
	rep := ""
	if o.replica >= 0 {
		rep = " on " + string(rune('A'+o.replica))
	}
	who := fmt.Sprintf("client %d", o.client)
	if o.client < 0 {
		who = "harness"
	}
	val := o.value
	if val == "" {
		val = "(none)"
	}
	var what string
	switch o.kind {
	case opPut:
		what = fmt.Sprintf("put(%s)", val)
	case opCAS:
		what = fmt.Sprintf("cas(If-Match %s [ETag of %s] -> %s)", short(o.etag), o.expect, val)
	case opGet:
		what = fmt.Sprintf("get -> %s %s", val, short(o.etag))
	case opRead:
		what = fmt.Sprintf("store read -> %s", val)
	case opEdit:
		what = fmt.Sprintf("ConfigMap edited by hand -> %s", val)
	case opDel:
		what = "ConfigMap deleted by hand"
	}
	res := o.out
	if o.status != 0 {
		res = fmt.Sprintf("%d %s", o.status, o.out)
	}
	if o.err != "" {
		res += " (" + truncate(o.err, 80) + ")"
	}
	if len(o.names) > 0 {
		what += " naming " + strings.Join(o.names, ",")
	}
	end := fmt.Sprintf("%8.3f", float64(o.ret)/1e9)
	if o.out == outUnk {
		end = "     end"
	}
	return fmt.Sprintf("[%8.3f, %s] %-9s %s%s: %s", float64(o.call)/1e9, end, who, what, rep, res)
}

func short(etag string) string {
	e := strings.Trim(etag, `"`)
	if len(e) > 10 {
		return `"` + e[:10] + `…"`
	}
	if e == "" {
		return ""
	}
	return `"` + e + `"`
}

type history struct {
	mu  sync.Mutex
	ops []*op
	t0  time.Time
}

func (h *history) now() int64 { return time.Since(h.t0).Nanoseconds() }

func (h *history) begin(client int, kind string, replica int) *op {
	o := &op{client: client, kind: kind, replica: replica, call: h.now(), ryw: -1}
	return o
}

func (h *history) end(o *op) {
	o.ret = h.now()
	h.mu.Lock()
	o.id = len(h.ops)
	h.ops = append(h.ops, o)
	h.mu.Unlock()
}

// nodeSet: the Nodes the workload's snapshots may name (created and selected).
type nodeSet struct {
	mu     sync.Mutex
	base   []string
	fresh  []string // newest last
	absent map[string]bool
}

func (s *nodeSet) pick(rng *rand.Rand) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string(nil), s.base...)
	for i, n := range s.fresh {
		if s.absent[n] {
			continue
		}
		p := 0.25
		if i == len(s.fresh)-1 {
			p = 0.7
		}
		if rng.Float64() < p {
			out = append(out, n)
		}
	}
	return out
}

func snapshotJSON(revision string, nodes []string) string {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"topology.gpustack.ai/v1alpha1","revision":`)
	rb, _ := json.Marshal(revision)
	b.Write(rb)
	b.WriteString(`,"nodes":{`)
	sort.Strings(nodes)
	for i, n := range nodes {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `%q:{"topology.gpustack.ai/region":"region-a","topology.gpustack.ai/zone":"zone-%d","topology.gpustack.ai/rack":"rack-%02d"}`, n, i%2, i)
	}
	b.WriteString("}}")
	return b.String()
}

type workload struct {
	c         *cluster
	h         *history
	nodes     *nodeSet
	seed      uint64
	mode      string // "mixed" or "pairs"
	stop      atomic.Bool
	readerTok string
	writerTok string
	reqTO     time.Duration
	revs      atomic.Int64
	skipped   atomic.Int64 // 4xx other than 412 (422: a Node the replica does not know), refused connections
	admMu     sync.Mutex
	admMax    time.Duration
	admN      int
	admBad    int
	admWorst  string
}

func readToken(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func (w *workload) httpClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: w.c.pki.pool},
		MaxIdleConnsPerHost: 4,
	}}
}

func (w *workload) url(r int, path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", w.c.replicas[r].port, path)
}

func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// push records a put or cas.
func (w *workload) push(hc *http.Client, client, r int, rng *rand.Rand, etag, expect string) *op {
	kind := opPut
	if etag != "" {
		kind = opCAS
	}
	rev := fmt.Sprintf("s%d-c%d-%d", w.seed, client, w.revs.Add(1))
	nodes := w.nodes.pick(rng)
	body := snapshotJSON(rev, nodes)
	o := w.pushBody(hc, client, r, kind, rev, body, etag, expect)
	if o != nil {
		o.names = nodes[len(w.nodes.base):]
	}
	return o
}

func (w *workload) pushBody(hc *http.Client, client, r int, kind, rev, body, etag, expect string) *op {
	o := w.h.begin(client, kind, r)
	o.value, o.etag, o.expect = rev, etag, expect
	req, _ := http.NewRequest("PUT", w.url(r, "/snapshots/"+w.c.inventory), strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+w.writerTok)
	req.Header.Set("Content-Type", "application/json")
	if etag != "" {
		req.Header.Set("If-Match", etag)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if refused(err) {
			w.skipped.Add(1)
			return nil
		}
		o.out, o.err = outUnk, err.Error()
		w.h.end(o)
		return o
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	o.status = resp.StatusCode
	switch {
	case resp.StatusCode == 200 || resp.StatusCode == 201:
		o.out = outOK
	case resp.StatusCode == 412:
		o.out = outFail
	case resp.StatusCode >= 500:
		o.out, o.err = outUnk, truncate(strings.TrimSpace(string(b)), 120)
	default:
		w.skipped.Add(1) // 422 and the like: refused before the store, no effect
		return nil
	}
	w.h.end(o)
	return o
}

func (w *workload) get(hc *http.Client, client, r int) *op {
	o := w.h.begin(client, opGet, r)
	req, _ := http.NewRequest("GET", w.url(r, "/snapshots/"+w.c.inventory), nil)
	req.Header.Set("Authorization", "Bearer "+w.readerTok)
	resp, err := hc.Do(req)
	if err != nil {
		return nil
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil // nothing served: no value to check
	}
	var snap struct {
		Revision string `json:"revision"`
	}
	if json.Unmarshal(b, &snap) != nil {
		return nil
	}
	o.status, o.out, o.value, o.etag = 200, outOK, snap.Revision, resp.Header.Get("ETag")
	w.h.end(o)
	return o
}

// getQuiet: what replica r serves now ("" when nothing), not recorded.
func (w *workload) getQuiet(hc *http.Client, r int) string {
	req, _ := http.NewRequest("GET", w.url(r, "/snapshots/"+w.c.inventory), nil)
	req.Header.Set("Authorization", "Bearer "+w.readerTok)
	resp, err := hc.Do(req)
	if err != nil {
		return "(unreachable)"
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return ""
	}
	var snap struct {
		Revision string `json:"revision"`
	}
	json.Unmarshal(b, &snap)
	return snap.Revision
}

func (w *workload) storeRead(ctx context.Context, client int) {
	o := w.h.begin(client, opRead, -1)
	cm, err := w.c.cp.readCM(ctx, w.c.ns, "topogate-"+w.c.inventory)
	if err != nil {
		return
	}
	o.out, o.value = outOK, cm.revision
	w.h.end(o)
}

func pause(rng *rand.Rand, lo, hi int) {
	time.Sleep(time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond)
}

// writer: puts and compare-and-sets with the ETag it read, on random replicas; after an
// acknowledged write, sometimes reads from the replica that acknowledged it.
func (w *workload) writer(client int) {
	rng := rand.New(rand.NewPCG(w.seed, uint64(client)))
	hc := w.httpClient(w.reqTO)
	n := len(w.c.replicas)
	avoid := make([]time.Time, n) // a replica that just gave an indeterminate answer is left alone for a second
	for !w.stop.Load() {
		r := rng.IntN(n)
		if time.Now().Before(avoid[r]) {
			pause(rng, 20, 60)
			continue
		}
		var o *op
		if rng.Float64() < 0.3 {
			o = w.push(hc, client, r, rng, "", "")
		} else {
			src := r
			if rng.Float64() < 0.5 {
				src = rng.IntN(n)
			}
			g := w.get(hc, client, src)
			if g != nil && g.etag != "" {
				o = w.push(hc, client, r, rng, g.etag, g.value)
			}
		}
		if o != nil && o.out == outUnk {
			avoid[r] = time.Now().Add(time.Second)
		}
		if o != nil && o.out == outOK && rng.Float64() < 0.6 {
			if g := w.get(hc, client, r); g != nil {
				g.ryw = o.id
			}
		}
		pause(rng, 20, 120)
	}
}

// pairs: two pushes at once to the same replica per round, each then reading its own write.
func (w *workload) pairs(client int) {
	rng := rand.New(rand.NewPCG(w.seed, uint64(client)))
	hcs := []*http.Client{w.httpClient(w.reqTO), w.httpClient(w.reqTO)}
	n := len(w.c.replicas)
	for round := 0; !w.stop.Load(); round++ {
		r := round % n
		var wg sync.WaitGroup
		start := make(chan struct{})
		for k := 0; k < 2; k++ {
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				krng := rand.New(rand.NewPCG(w.seed, uint64(client*1000+round*2+k)))
				<-start
				o := w.push(hcs[k], client+k, r, krng, "", "")
				if o != nil && o.out == outOK {
					if g := w.get(hcs[k], client+k, r); g != nil {
						g.ryw = o.id
					}
				}
			}(k)
		}
		close(start)
		wg.Wait()
		pause(rng, 100, 400)
	}
}

func (w *workload) reader(client, r int, lo, hi int) {
	rng := rand.New(rand.NewPCG(w.seed, uint64(client)))
	hc := w.httpClient(3 * time.Second)
	for !w.stop.Load() {
		w.get(hc, client, r)
		pause(rng, lo, hi)
	}
}

func (w *workload) storeReader(ctx context.Context, client int) {
	rng := rand.New(rand.NewPCG(w.seed, uint64(client)))
	for !w.stop.Load() {
		w.storeRead(ctx, client)
		pause(rng, 80, 160)
	}
}

// A TopologySource admission review (allowed): the answer must stay prompt whatever the store does.
const admissionReview = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{` +
	`"uid":"6f1d2c3e-0000-4000-8000-00000000lin1","kind":{"group":"worker.gpustack.ai","version":"v1","kind":"TopologySource"},` +
	`"resource":{"group":"worker.gpustack.ai","version":"v1","resource":"topologysources"},"name":"lin","operation":"CREATE",` +
	`"userInfo":{"username":"lincheck"},"object":{"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource",` +
	`"metadata":{"name":"lin"},"spec":{"nodeSelector":{},"levels":["topology.gpustack.ai/region","topology.gpustack.ai/zone",` +
	`"topology.gpustack.ai/rack"],"configMap":{"configMapRef":{"namespace":"gpustack-system","name":"topology-inventory"},` +
	`"key":"snapshot.yaml","maxStaleness":"10m"}}},"oldObject":null,"dryRun":false}}`

func (w *workload) admission(r int) {
	hc := w.httpClient(15 * time.Second)
	for !w.stop.Load() {
		if !w.c.running(w.c.replicas[r]) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		t := time.Now()
		resp, err := hc.Post(w.url(r, "/validate/topologysources?timeout=10s"), "application/json",
			bytes.NewReader([]byte(admissionReview)))
		d := time.Since(t)
		ok := false
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ok = resp.StatusCode == 200 && bytes.Contains(b, []byte(`"allowed":true`))
		} else if refused(err) || !w.c.running(w.c.replicas[r]) {
			continue // the replica is down (restarting): no answer to time
		}
		w.admMu.Lock()
		w.admN++
		if !ok {
			w.admBad++
		}
		if d > w.admMax {
			w.admMax = d
			w.admWorst = fmt.Sprintf("replica %s at %.1f s", w.c.replicas[r].name, float64(w.h.now())/1e9)
		}
		w.admMu.Unlock()
		time.Sleep(200 * time.Millisecond)
	}
}
