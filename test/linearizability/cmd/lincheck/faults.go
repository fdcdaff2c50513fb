package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Fault kinds. Proxy faults act on one replica's connection to the apiserver.
const (
	fCMDelay     = "cm-watch-delay"
	fCMPause     = "cm-watch-pause"
	fNodeDelay   = "node-watch-delay"
	fNodeLag     = "node-lag"     // a replica's Node watch paused while a Node is created (or relabelled into the selector) and pushes name it
	fNodeRelabel = "node-relabel" // a Node relabelled out of the selector and back while one replica's Node watch is paused
	fBlackhole   = "blackhole"
	fCut         = "cut-streams"
	fWriteDrop   = "write-drop"  // writes forwarded, answers dropped
	fWriteDelay  = "write-delay" // writes forwarded, answers delayed past store.timeout
	fAPIKill     = "apiserver-kill"
	fEtcdStop    = "etcd-stop"
	fCompact     = "compact"
	fCMDelete    = "cm-delete"
	fCMEdit      = "cm-edit"
	fReplicaKill = "replica-kill"
	fRolling     = "rolling-restart"
)

var allFaults = []string{fCMDelay, fCMPause, fNodeDelay, fNodeLag, fNodeRelabel, fBlackhole, fCut,
	fWriteDrop, fWriteDelay, fAPIKill, fEtcdStop, fCompact, fCMDelete, fCMEdit, fReplicaKill, fRolling}

// plans name the fault sets (and workloads) of the runs.
var plans = map[string][]string{
	"none":        {},
	"lost-update": {fNodeLag},
	"reversal":    {fCMDelay},
	"proxy":       {fCMDelay, fCMPause, fNodeDelay, fNodeLag, fBlackhole, fCut, fWriteDrop, fWriteDelay},
	"all":         allFaults,
}

type fault struct {
	at      time.Duration // from the start of the workload
	dur     time.Duration
	kind    string
	replica int // -1: the control plane or every replica
	param   time.Duration
	// filled in when run
	start, end int64
	note       string
}

func (f *fault) String() string {
	rep := ""
	if f.replica >= 0 {
		rep = " replica " + string(rune('A'+f.replica))
	}
	p := ""
	if f.param > 0 {
		p = " param " + f.param.String()
	}
	n := ""
	if f.note != "" {
		n = " (" + f.note + ")"
	}
	return fmt.Sprintf("%6.1fs +%-5s %s%s%s%s", f.at.Seconds(), f.dur.Round(100*time.Millisecond), f.kind, rep, p, n)
}

func ms(rng *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond
}

// schedule draws the faults from the seed: one after another from 2 s on, each kind
// with its own duration, until `until`. The same seed, duration, replica count and plan
// give the same schedule.
func schedule(seed uint64, kinds []string, replicas int, until time.Duration, timeout time.Duration) []*fault {
	if len(kinds) == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var out []*fault
	t := 2 * time.Second
	for {
		k := kinds[rng.IntN(len(kinds))]
		f := &fault{at: t, kind: k, replica: rng.IntN(replicas)}
		switch k {
		case fCMDelay:
			f.dur, f.param = ms(rng, 3000, 8000), ms(rng, 200, 1500)
		case fNodeDelay:
			f.dur, f.param = ms(rng, 3000, 8000), ms(rng, 500, 3000)
		case fCMPause, fBlackhole:
			f.dur = ms(rng, 1000, 5000)
		case fNodeLag, fNodeRelabel:
			f.dur = ms(rng, 3000, 8000)
		case fCut, fCompact, fCMDelete, fCMEdit:
			f.dur = ms(rng, 500, 1500)
		case fWriteDrop:
			f.dur = ms(rng, 2000, 6000)
		case fWriteDelay:
			f.dur, f.param = ms(rng, 2000, 6000), timeout+ms(rng, 200, 2000)
		case fAPIKill:
			f.dur = ms(rng, 1000, 4000) // down for this long; the restart itself takes more
			f.replica = -1
		case fEtcdStop:
			f.dur = ms(rng, 500, 4000)
			f.replica = -1
		case fReplicaKill:
			f.dur = ms(rng, 500, 3000)
		case fRolling:
			f.dur = time.Duration(replicas) * 3 * time.Second
			f.replica = -1
		}
		if k == fCompact || k == fCMDelete || k == fCMEdit {
			f.replica = -1
		}
		if t+f.dur > until {
			break
		}
		out = append(out, f)
		t += f.dur + ms(rng, 500, 2500)
	}
	return out
}

// runner executes a schedule against the cluster.
type runner struct {
	c      *cluster
	w      *workload
	h      *history
	nodes  *nodeSet
	mu     sync.Mutex
	log    []string
	fresh  int
	edits  int
	counts map[string]int
}

func (r *runner) logf(format string, a ...any) {
	line := fmt.Sprintf("%8.3f ", float64(r.h.now())/1e9) + fmt.Sprintf(format, a...)
	r.mu.Lock()
	r.log = append(r.log, line)
	r.mu.Unlock()
}

func (r *runner) run(ctx context.Context, t0 time.Time, faults []*fault) {
	for _, f := range faults {
		if d := time.Until(t0.Add(f.at)); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			return
		}
		f.start = r.h.now()
		r.apply(ctx, f)
		f.end = r.h.now()
		r.mu.Lock()
		r.counts[f.kind]++
		r.mu.Unlock()
		r.logf("done %s", f)
	}
}

func (r *runner) sleep(ctx context.Context, d time.Duration) { sleepCtx(ctx, d) }

func (r *runner) apply(ctx context.Context, f *fault) {
	var rep *replica
	if f.replica >= 0 {
		rep = r.c.replicas[f.replica]
	}
	r.logf("start %s", f)
	switch f.kind {
	case fCMDelay:
		rep.proxy.set(func() { rep.proxy.cmDelay = f.param })
		r.sleep(ctx, f.dur)
		rep.proxy.set(func() { rep.proxy.cmDelay = 0 })
	case fNodeDelay:
		rep.proxy.set(func() { rep.proxy.nodeDelay = f.param })
		r.sleep(ctx, f.dur)
		rep.proxy.set(func() { rep.proxy.nodeDelay = 0 })
	case fCMPause:
		rep.proxy.set(func() { rep.proxy.cmPaused = true })
		r.sleep(ctx, f.dur)
		rep.proxy.set(func() { rep.proxy.cmPaused = false })
	case fBlackhole:
		rep.proxy.set(func() { rep.proxy.blackhole = true })
		r.sleep(ctx, f.dur)
		rep.proxy.set(func() { rep.proxy.blackhole = false })
	case fCut:
		f.note = fmt.Sprintf("%d streams", rep.proxy.cutStreams())
		r.sleep(ctx, f.dur)
	case fWriteDrop:
		rep.proxy.set(func() { rep.proxy.writeMode = writeDrop })
		r.sleep(ctx, f.dur)
		rep.proxy.set(func() { rep.proxy.writeMode = writeOK })
	case fWriteDelay:
		rep.proxy.set(func() { rep.proxy.writeMode, rep.proxy.writeDelay = writeDelay, f.param })
		r.sleep(ctx, f.dur)
		rep.proxy.set(func() { rep.proxy.writeMode = writeOK })
	case fNodeLag:
		rep.proxy.set(func() { rep.proxy.nodePaused = true })
		r.sleep(ctx, 300*time.Millisecond)
		r.mu.Lock()
		r.fresh++
		name := fmt.Sprintf("lin-%s-x%d", r.c.inventory, r.fresh)
		r.mu.Unlock()
		code, err := r.c.cp.createNode(ctx, name, "gpu")
		f.note = fmt.Sprintf("Node %s created: %d %v", name, code, errText(err))
		if err == nil && code == 201 {
			r.nodes.mu.Lock()
			r.nodes.fresh = append(r.nodes.fresh, name)
			r.nodes.mu.Unlock()
		}
		r.sleep(ctx, f.dur-300*time.Millisecond)
		rep.proxy.set(func() { rep.proxy.nodePaused = false })
	case fNodeRelabel:
		r.nodes.mu.Lock()
		var name string
		if len(r.nodes.fresh) > 0 {
			name = r.nodes.fresh[len(r.nodes.fresh)-1]
		}
		r.nodes.mu.Unlock()
		rep.proxy.set(func() { rep.proxy.nodePaused = true })
		if name == "" { // none created yet: one now, which the paused replica does not see either
			r.mu.Lock()
			r.fresh++
			name = fmt.Sprintf("lin-%s-x%d", r.c.inventory, r.fresh)
			r.mu.Unlock()
			if code, err := r.c.cp.createNode(ctx, name, "gpu"); err != nil || code != 201 {
				f.note = fmt.Sprintf("create Node %s: %d %s", name, code, errText(err))
				r.sleep(ctx, f.dur)
				rep.proxy.set(func() { rep.proxy.nodePaused = false })
				return
			}
			r.nodes.mu.Lock()
			r.nodes.fresh = append(r.nodes.fresh, name)
			r.nodes.mu.Unlock()
			r.sleep(ctx, f.dur/4)
		}
		r.nodes.mu.Lock()
		r.nodes.absent[name] = true
		r.nodes.mu.Unlock()
		code1, _ := r.c.cp.labelNode(ctx, name, "cpu")
		r.sleep(ctx, f.dur/2)
		code2, _ := r.c.cp.labelNode(ctx, name, "gpu")
		r.nodes.mu.Lock()
		delete(r.nodes.absent, name)
		r.nodes.mu.Unlock()
		f.note = fmt.Sprintf("Node %s out (%d) and back (%d)", name, code1, code2)
		r.sleep(ctx, f.dur/2)
		rep.proxy.set(func() { rep.proxy.nodePaused = false })
	case fAPIKill:
		pid, err := r.c.cp.pid("apiserver")
		if err != nil {
			f.note = err.Error()
			return
		}
		syscall.Kill(pid, syscall.SIGKILL)
		waitGone(pid, 10*time.Second)
		r.sleep(ctx, f.dur)
		t := time.Now()
		out, err := runScript(r.c.cp.script, "apiserver-start")
		f.note = fmt.Sprintf("restarted in %.1f s", time.Since(t).Seconds())
		if err != nil {
			f.note += ": " + truncate(out, 200)
		}
	case fEtcdStop:
		pid, err := r.c.cp.pid("etcd")
		if err != nil {
			f.note = err.Error()
			return
		}
		syscall.Kill(pid, syscall.SIGSTOP)
		r.sleep(context.WithoutCancel(ctx), f.dur)
		syscall.Kill(pid, syscall.SIGCONT)
	case fCompact:
		// A write the replicas' watches do not carry moves etcd past their resourceVersions;
		// the compaction removes those; the replicas' watch streams end cleanly (as at their
		// timeout), so they resume from what they last saw, through an apiserver restarted
		// with an empty watch cache: served from etcd, a compacted resourceVersion is 410.
		r.c.cp.do(ctx, "PATCH", "/api/v1/namespaces/"+r.c.ns, "application/merge-patch+json",
			[]byte(fmt.Sprintf(`{"metadata":{"annotations":{"lincheck/tick":"%d"}}}`, r.h.now())))
		rev, err := r.c.cp.etcdCompact()
		n := 0
		for _, rp := range r.c.replicas { // resumed watches wait for the restarted apiserver
			rp.proxy.set(func() { rp.proxy.blackhole = true })
			n += rp.proxy.endStreams()
		}
		if pid, perr := r.c.cp.pid("apiserver"); perr == nil {
			syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, 10*time.Second)
		}
		t := time.Now()
		out, serr := runScript(r.c.cp.script, "apiserver-start")
		for _, rp := range r.c.replicas {
			rp.proxy.set(func() { rp.proxy.blackhole = false })
		}
		f.note = fmt.Sprintf("compacted at %d %s, %d streams ended, apiserver restarted in %.1f s", rev, errText(err), n, time.Since(t).Seconds())
		if serr != nil {
			f.note += ": " + truncate(out, 200)
		}
		r.sleep(ctx, f.dur)
	case fCMDelete:
		o := r.h.begin(-1, opDel, -1)
		code, err := r.c.cp.deleteCM(ctx, r.c.ns, "topogate-"+r.c.inventory)
		switch {
		case err != nil:
			o.out, o.err = outUnk, err.Error()
			r.h.end(o)
		case code == 200 || code == 202:
			o.out, o.status = outOK, code
			r.h.end(o)
		}
		f.note = fmt.Sprintf("%d %s", code, errText(err))
		r.sleep(ctx, f.dur)
	case fCMEdit:
		r.mu.Lock()
		r.edits++
		rev := fmt.Sprintf("s%d-hand-%d", r.w.seed, r.edits)
		r.mu.Unlock()
		o := r.h.begin(-1, opEdit, -1)
		o.value = rev
		code, err := r.c.cp.editCM(ctx, r.c.ns, "topogate-"+r.c.inventory, snapshotJSON(rev, r.nodes.pick(rand.New(rand.NewPCG(r.w.seed, uint64(r.edits))))))
		switch {
		case err != nil:
			o.out, o.err = outUnk, err.Error()
			r.h.end(o)
		case code == 200:
			o.out, o.status = outOK, code
			r.h.end(o)
		}
		f.note = fmt.Sprintf("%s: %d %s", rev, code, errText(err))
		r.sleep(ctx, f.dur)
	case fReplicaKill:
		r.c.kill(rep)
		r.sleep(ctx, f.dur)
		rep.mu.Lock()
		rep.restarts++
		rep.mu.Unlock()
		if err := r.c.start(rep); err != nil {
			f.note = err.Error()
		}
	case fRolling:
		var notes []string
		for _, rp := range r.c.replicas {
			r.c.stop(rp)
			rp.mu.Lock()
			rp.variant++
			rp.restarts++
			rp.mu.Unlock()
			if err := r.c.start(rp); err != nil {
				notes = append(notes, err.Error())
				continue
			}
			if err := r.c.waitReady(ctx, rp, 20*time.Second); err != nil {
				notes = append(notes, err.Error())
			}
		}
		f.note = "configuration variant changed"
		if len(notes) > 0 {
			f.note += ": " + strings.Join(notes, "; ")
		}
	}
}

// waitGone waits until process pid no longer exists (control-plane.sh starts a new
// apiserver only once the old one is gone).
func waitGone(pid int, limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// heal ends every fault: proxies clean, etcd running, the apiserver and every replica up.
func (r *runner) heal(ctx context.Context) {
	for _, rp := range r.c.replicas {
		rp.proxy.heal()
	}
	if pid, err := r.c.cp.pid("etcd"); err == nil {
		syscall.Kill(pid, syscall.SIGCONT)
	}
	if out, err := runScript(r.c.cp.script, "apiserver-start"); err != nil {
		r.logf("heal: apiserver-start: %s", truncate(out, 200))
	}
	for _, rp := range r.c.replicas {
		if !r.c.running(rp) {
			if err := r.c.start(rp); err != nil {
				r.logf("heal: %v", err)
			}
		}
	}
}

func faultCounts(fs []*fault) string {
	m := map[string]int{}
	for _, f := range fs {
		if f.start != 0 {
			m[f.kind]++
		}
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}
