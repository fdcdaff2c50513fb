package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

const poolLabel = "topogate-lin/pool"

// replica is one topogate process on the kubernetes store, reaching the apiserver
// through its own fault proxy.
type replica struct {
	idx        int
	name       string
	port       int
	healthPort int
	cfgPath    string
	logPath    string
	proxy      *faultProxy

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	variant  int // the configuration generation (rolling restarts change it)
	restarts int
	kills    int
}

type cluster struct {
	binary    string
	dir       string
	ns        string
	inventory string
	pki       *pki
	cp        *controlPlane
	reader    string // token files
	writer    string
	source    string
	timeout   time.Duration
	replicas  []*replica
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *cluster) writeSource() error {
	c.source = filepath.Join(c.dir, "source.yaml")
	return os.WriteFile(c.source, []byte(`apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: `+c.inventory+`
spec:
  nodeSelector:
    matchLabels: {`+poolLabel+`: gpu}
  levels:
    - topology.gpustack.ai/region
    - topology.gpustack.ai/zone
    - topology.gpustack.ai/rack
  configMap:
    configMapRef:
      namespace: gpustack-system
      name: topology-inventory
    key: snapshot.yaml
    maxStaleness: 10m
`), 0o600)
}

// writeConfig writes the replica's configuration; variant 1 is the "changed" configuration
// of a rolling restart (another store.timeout, resync interval and log level).
func (c *cluster) writeConfig(r *replica) error {
	timeout, resync, level := c.timeout, "2s", "info"
	if r.variant%2 == 1 {
		timeout, resync, level = c.timeout+time.Second, "3s", "debug"
	}
	cfg := fmt.Sprintf(`listen: {address: 127.0.0.1, port: %d, healthPort: %d}
tls: {certFile: %s, keyFile: %s}
logging: {level: %s, accessLog: false}
admission: {workerNamespace: gpustack-system}
resyncInterval: %s
store:
  type: kubernetes
  namespace: %s
  apiServer: %s
  tokenFile: %s
  caFile: %s
  timeout: %s
inventories:
  - name: %s
    source: %s
    nodesFromAPI: true
    unknownNodes: reject
    allowEmptyStart: true
    readers: {bearerTokenFiles: [%s]}
    writers: {bearerTokenFiles: [%s]}
`, r.port, r.healthPort, c.pki.certFile, c.pki.keyFile, level, resync, c.ns, r.proxy.url(),
		c.cp.tokenFile, c.pki.caFile, timeout, c.inventory, c.source, c.reader, c.writer)
	return os.WriteFile(r.cfgPath, []byte(cfg), 0o600)
}

func (c *cluster) start(r *replica) error {
	if err := c.writeConfig(r); err != nil {
		return err
	}
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "---- lincheck: start (configuration variant %d)\n", r.variant)
	cmd := exec.Command(c.binary, "serve", "--config", r.cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()
	return c.waitLive(r, 60*time.Second)
}

func (c *cluster) waitLive(r *replica, limit time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		done := r.done
		r.mu.Unlock()
		select {
		case <-done:
			return fmt.Errorf("%s exited during start-up (log %s)", r.name, r.logPath)
		default:
		}
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/livez", r.healthPort))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not live after %s (log %s)", r.name, limit, r.logPath)
}

// waitReady waits for /readyz (the store answered its first read).
func (c *cluster) waitReady(ctx context.Context, r *replica, limit time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", r.healthPort))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s", r.name, limit)
}

func (c *cluster) signal(r *replica, sig syscall.Signal, wait time.Duration) {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		cmd.Process.Kill()
		<-done
	}
}

func (c *cluster) kill(r *replica) {
	c.signal(r, syscall.SIGKILL, 10*time.Second)
	r.mu.Lock()
	r.kills++
	r.mu.Unlock()
}

func (c *cluster) stop(r *replica) { c.signal(r, syscall.SIGTERM, 30*time.Second) }

func (c *cluster) running(r *replica) bool {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func (c *cluster) setup(n int, logw *os.File) error {
	for i := 0; i < n; i++ {
		name := string(rune('A' + i))
		px, err := newFaultProxy(name, c.cp.url, c.cp.tlsConfig, c.pki.cert, logw)
		if err != nil {
			return err
		}
		port, err := freePort()
		if err != nil {
			return err
		}
		hport, err := freePort()
		if err != nil {
			return err
		}
		c.replicas = append(c.replicas, &replica{
			idx: i, name: name, port: port, healthPort: hport, proxy: px,
			cfgPath: filepath.Join(c.dir, "replica-"+name+".yaml"),
			logPath: filepath.Join(c.dir, "replica-"+name+".log"),
		})
	}
	for _, r := range c.replicas {
		if err := c.start(r); err != nil {
			return err
		}
	}
	return nil
}
