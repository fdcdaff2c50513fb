package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// What a request from a replica to the apiserver is, told apart by method, path and query.
type reqKind int

const (
	kindOther reqKind = iota
	kindCMWatch
	kindNodeWatch
	kindCMWrite
)

func (k reqKind) String() string {
	return [...]string{"other", "configmap-watch", "node-watch", "configmap-write"}[k]
}

func classify(r *http.Request) reqKind {
	p := r.URL.Path
	q := r.URL.Query()
	watch := q.Get("watch") == "1" || q.Get("watch") == "true"
	cm := strings.HasPrefix(p, "/api/v1/namespaces/") && strings.Contains(p, "/configmaps")
	switch {
	case cm && watch:
		return kindCMWatch
	case strings.HasPrefix(p, "/api/v1/nodes") && watch:
		return kindNodeWatch
	case cm && r.Method != http.MethodGet && r.Method != http.MethodHead:
		return kindCMWrite
	}
	return kindOther
}

// Write faults: the write is forwarded to the apiserver, and then its answer is dropped
// (the replica's request hangs until the replica gives up) or delayed.
const (
	writeOK = iota
	writeDrop
	writeDelay
)

var errCut = errors.New("stream cut by the fault proxy")

// faultProxy is one replica's view of the apiserver: a TLS-terminating reverse proxy whose
// faults the schedule sets.
type faultProxy struct {
	name     string
	upstream *url.URL
	base     http.RoundTripper
	srv      *http.Server
	addr     string

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every change
	cmDelay    time.Duration
	nodeDelay  time.Duration
	cmPaused   bool
	nodePaused bool
	blackhole  bool
	writeMode  int
	writeDelay time.Duration
	streams    map[*faultBody]struct{}
	sent       map[string]bool // revisions of ConfigMap writes transmitted to the apiserver

	requests   [4]atomic.Int64
	cuts       atomic.Int64
	dropped    atomic.Int64
	delayed    atomic.Int64
	gone410    atomic.Int64
	held       atomic.Int64
	errorsSeen atomic.Int64
}

func newFaultProxy(name, upstream string, upstreamCA *tls.Config, serving tls.Certificate, logw io.Writer) (*faultProxy, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	p := &faultProxy{
		name:     name,
		upstream: u,
		changed:  make(chan struct{}),
		streams:  map[*faultBody]struct{}{},
		sent:     map[string]bool{},
		base: &http.Transport{
			TLSClientConfig:     upstreamCA,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
		},
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = u.Host
		},
		Transport:     p,
		FlushInterval: -1,
		ErrorLog:      log.New(logw, "proxy "+name+": ", log.LstdFlags|log.Lmicroseconds),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.addr = ln.Addr().String()
	p.srv = &http.Server{
		Handler:   rp,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{serving}, NextProtos: []string{"http/1.1"}},
		ErrorLog:  log.New(logw, "proxy "+name+" server: ", log.LstdFlags|log.Lmicroseconds),
	}
	go p.srv.ServeTLS(ln, "", "")
	return p, nil
}

func (p *faultProxy) url() string { return "https://" + p.addr }

func (p *faultProxy) close() {
	p.heal()
	p.srv.Close()
}

// set changes the fault state under the lock and wakes every waiter.
func (p *faultProxy) set(f func()) {
	p.mu.Lock()
	f()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

func (p *faultProxy) heal() {
	p.set(func() {
		p.cmDelay, p.nodeDelay = 0, 0
		p.cmPaused, p.nodePaused, p.blackhole = false, false, false
		p.writeMode, p.writeDelay = writeOK, 0
	})
}

// cutStreams ends every open watch stream abruptly (the replica sees a truncated response).
func (p *faultProxy) cutStreams() int {
	p.mu.Lock()
	var open []*faultBody
	for b := range p.streams {
		open = append(open, b)
	}
	p.mu.Unlock()
	for _, b := range open {
		b.cut()
	}
	p.cuts.Add(int64(len(open)))
	return len(open)
}

// endStreams ends every open watch stream as cleanly as a watch's timeoutSeconds does, so
// the replica resumes from the resourceVersion it last saw.
func (p *faultProxy) endStreams() int {
	p.mu.Lock()
	var open []*faultBody
	for b := range p.streams {
		open = append(open, b)
	}
	p.mu.Unlock()
	for _, b := range open {
		b.cutOnce.Do(func() {
			b.clean = true
			close(b.cutCh)
			b.up.Close()
		})
	}
	return len(open)
}

// waitFor blocks until cond (read under the lock) holds or ctx ends.
func (p *faultProxy) waitFor(ctx context.Context, cond func() bool) error {
	for {
		p.mu.Lock()
		ok := cond()
		ch := p.changed
		p.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

func (p *faultProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	kind := classify(req)
	p.requests[kind].Add(1)
	// A blackhole holds every request until it lifts (as retransmission would deliver it),
	// or until the replica gives up.
	if err := p.waitFor(req.Context(), func() bool {
		if p.blackhole {
			p.held.Add(1)
		}
		return !p.blackhole
	}); err != nil {
		return nil, err
	}
	if kind == kindCMWrite {
		if rev := p.noteWrite(req); rev != "" {
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				WroteHeaders: func() {
					p.mu.Lock()
					p.sent[rev] = true
					p.mu.Unlock()
				},
			}))
		}
		p.mu.Lock()
		mode, d := p.writeMode, p.writeDelay
		p.mu.Unlock()
		if mode != writeOK {
			return p.faultyWrite(req, mode, d)
		}
	}
	resp, err := p.base.RoundTrip(req)
	if err != nil {
		p.errorsSeen.Add(1)
		return nil, err
	}
	if resp.StatusCode == http.StatusGone {
		p.gone410.Add(1)
	}
	if kind == kindCMWatch || kind == kindNodeWatch {
		resp.Body = p.newFaultBody(kind, resp.Body)
	}
	return resp, nil
}

// noteWrite returns the revision a ConfigMap write carries. Once its request headers are
// written to the apiserver's connection the revision counts as sent: an indeterminate push
// whose revision no proxy ever sent cannot have taken effect.
func (p *faultProxy) noteWrite(req *http.Request) string {
	if req.Body == nil {
		return ""
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return ""
	}
	var cm configMap
	if json.Unmarshal(b, &cm) != nil {
		return ""
	}
	rev, _ := revisionOf(&cm)
	return rev
}

func (p *faultProxy) wasSent(rev string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent[rev]
}

// faultyWrite forwards the write whatever the replica does meanwhile, so the apiserver
// completes it, then withholds the answer.
func (p *faultProxy) faultyWrite(req *http.Request, mode int, d time.Duration) (*http.Response, error) {
	out := req.Clone(context.WithoutCancel(req.Context()))
	resp, err := p.base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if mode == writeDrop {
		p.dropped.Add(1)
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	p.delayed.Add(1)
	select {
	case <-time.After(d):
		return resp, nil
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

type chunk struct {
	b  []byte
	at time.Time
}

// faultBody is a watch stream's body: a delay line that also pauses and can be cut.
type faultBody struct {
	p       *faultProxy
	kind    reqKind
	up      io.ReadCloser
	ch      chan chunk
	cur     []byte
	cutCh   chan struct{}
	cutOnce sync.Once
	clean   bool // ended on purpose as a watch ends at its timeout: the replica resumes
	err     error
}

func (p *faultProxy) newFaultBody(kind reqKind, up io.ReadCloser) *faultBody {
	b := &faultBody{p: p, kind: kind, up: up, ch: make(chan chunk, 4096), cutCh: make(chan struct{})}
	p.mu.Lock()
	p.streams[b] = struct{}{}
	p.mu.Unlock()
	go b.pump()
	return b
}

func (b *faultBody) pump() {
	defer close(b.ch)
	for {
		buf := make([]byte, 32<<10)
		n, err := b.up.Read(buf)
		if n > 0 {
			if bytes.Contains(buf[:n], []byte(`"code":410`)) {
				b.p.gone410.Add(1)
			}
			select {
			case b.ch <- chunk{buf[:n], time.Now()}:
			case <-b.cutCh:
				return
			}
		}
		if err != nil {
			b.err = err
			return
		}
	}
}

func (b *faultBody) cut() {
	b.cutOnce.Do(func() {
		close(b.cutCh)
		b.up.Close()
	})
}

// hold returns the delay and whether the stream is paused now.
func (b *faultBody) hold() (time.Duration, bool, chan struct{}) {
	p := b.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.kind == kindCMWatch {
		return p.cmDelay, p.cmPaused || p.blackhole, p.changed
	}
	return p.nodeDelay, p.nodePaused || p.blackhole, p.changed
}

func (b *faultBody) Read(out []byte) (int, error) {
	if len(b.cur) == 0 {
		var c chunk
		select {
		case cc, ok := <-b.ch:
			if !ok {
				select {
				case <-b.cutCh:
					if b.clean {
						return 0, io.EOF
					}
					return 0, errCut
				default:
				}
				if b.err == nil {
					return 0, io.EOF
				}
				return 0, b.err
			}
			c = cc
		case <-b.cutCh:
			if b.clean {
				return 0, io.EOF
			}
			return 0, errCut
		}
		for {
			d, paused, changed := b.hold()
			if paused {
				select {
				case <-changed:
					continue
				case <-b.cutCh:
					return 0, errCut
				}
			}
			wait := time.Until(c.at.Add(d))
			if wait <= 0 {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-changed:
			case <-b.cutCh:
				t.Stop()
				return 0, errCut
			}
			t.Stop()
		}
		b.cur = c.b
	}
	n := copy(out, b.cur)
	b.cur = b.cur[n:]
	return n, nil
}

func (b *faultBody) Close() error {
	b.p.mu.Lock()
	delete(b.p.streams, b)
	b.p.mu.Unlock()
	b.cut()
	return nil
}
