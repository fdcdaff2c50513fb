// lincheck runs topogate replicas on the kubernetes store of a real control plane, each
// behind its own fault proxy, drives concurrent pushes, compare-and-sets and reads while a
// seeded fault schedule runs, records every call and return, and checks the history:
//
//	P1  writes and direct store reads are linearizable (a register of the revision)
//	P2  each replica's GETs are linearizable once their call is moved back by -stale,
//	    outside fault windows (and a grace after each)
//	P3  per replica, reads never go backwards in the store's order; a client reads its own
//	    acknowledged write from the replica that acknowledged it
//	P4  every served revision was at some time the store's revision
//	P5  within -settle after the faults end, every replica serves the store's revision
//
// Usage: lincheck -topogate BIN -control-plane test/e2e/control-plane.sh -seed N
//
//	-duration 60s -replicas 2 -plan all [-work DIR] [-artifacts DIR] [-summary FILE]
//
// with the control plane's environment (eval "$(test/e2e/control-plane.sh env)").
// lincheck table FILE prints the summaries of several runs as a table.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
)

type summary struct {
	Seed          uint64            `json:"seed"`
	Plan          string            `json:"plan"`
	Workload      string            `json:"workload"`
	Replicas      int               `json:"replicas"`
	DurationS     float64           `json:"durationSeconds"`
	Ops           int               `json:"operations"`
	Writes        int               `json:"writes"`
	Indeterminate int               `json:"indeterminate"`
	Skipped       int64             `json:"skipped"`
	Faults        string            `json:"faults"`
	Verdicts      map[string]string `json:"verdicts"`
	SettleS       float64           `json:"settleSeconds"`
	AdmissionMaxS float64           `json:"admissionMaxSeconds"`
	AdmissionN    int               `json:"admissionReviews"`
	AdmissionBad  int               `json:"admissionFailed"`
	StaleS        float64           `json:"staleBoundSeconds"`
	Binary        string            `json:"binary"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "table" {
		os.Exit(table(os.Args[2:]))
	}
	os.Exit(run())
}

func runScript(script string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...).CombinedOutput()
	return string(out), err
}

func run() int {
	var (
		binary    = flag.String("topogate", "", "the topogate binary")
		script    = flag.String("control-plane", "test/e2e/control-plane.sh", "control-plane.sh (apiserver-start after a kill)")
		seed      = flag.Uint64("seed", 1, "seed of the fault schedule and the clients")
		duration  = flag.Duration("duration", 60*time.Second, "how long the clients run (faults end 3 s before)")
		nrep      = flag.Int("replicas", 2, "topogate replicas (1-3)")
		planName  = flag.String("plan", "all", "fault plan: none, lost-update, reversal, proxy, all, or kinds separated by commas")
		wl        = flag.String("workload", "", "mixed (puts, compare-and-sets, reads) or pairs (two pushes at once per round); default pairs for the reversal plan")
		work      = flag.String("work", "", "folder for configurations, certificates and logs (default: a new temporary folder)")
		artifacts = flag.String("artifacts", "", "folder for the history and Porcupine's visualization (default: the work folder)")
		sumFile   = flag.String("summary", "", "append the run's summary (one JSON line) to this file")
		stale     = flag.Duration("stale", time.Second, "P2: the staleness bound of a replica's GET")
		grace     = flag.Duration("grace", 3*time.Second, "P2: reads this long after a proxy fault on the replica ends are not held to the bound")
		cpGrace   = flag.Duration("cp-grace", 15*time.Second, "P2: the same after a control-plane fault, a blackhole, a write fault or a restart")
		settle    = flag.Duration("settle", 30*time.Second, "P5: the bound after the faults end")
		timeout   = flag.Duration("store-timeout", 2*time.Second, "the replicas' store.timeout")
		writers   = flag.Int("writers", 3, "writer clients (mixed workload)")
		checkTO   = flag.Duration("check-timeout", 30*time.Second, "Porcupine's deadline per check")
	)
	flag.Parse()
	if *binary == "" || *nrep < 1 || *nrep > 3 {
		fmt.Fprintln(os.Stderr, "lincheck: -topogate BIN and -replicas 1..3 are required")
		return 2
	}
	kinds, ok := plans[*planName]
	if !ok {
		for _, k := range strings.Split(*planName, ",") {
			found := false
			for _, a := range allFaults {
				found = found || a == k
			}
			if !found {
				fmt.Fprintf(os.Stderr, "lincheck: unknown plan or fault %q\n", k)
				return 2
			}
			kinds = append(kinds, k)
		}
	}
	if *wl == "" {
		*wl = "mixed"
		if *planName == "reversal" {
			*wl = "pairs"
		}
	}
	cp, err := loadControlPlane(*script)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lincheck:", err)
		return 2
	}
	if *work == "" {
		*work, err = os.MkdirTemp("", "lincheck.")
		if err != nil {
			fmt.Fprintln(os.Stderr, "lincheck:", err)
			return 2
		}
	}
	*work = filepath.Join(*work, fmt.Sprintf("seed-%d", *seed))
	os.MkdirAll(*work, 0o700)
	if *artifacts == "" {
		*artifacts = *work
	}
	os.MkdirAll(*artifacts, 0o755)
	logw, _ := os.Create(filepath.Join(*work, "proxy.log"))
	defer logw.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &cluster{binary: *binary, dir: *work, ns: "topogate-lin", inventory: fmt.Sprintf("lin-%d", *seed), cp: cp, timeout: *timeout}
	defer func() {
		for _, r := range c.replicas {
			c.stop(r)
			r.proxy.close()
		}
		if pid, err := cp.pid("etcd"); err == nil {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		if pid, err := cp.pid("etcd"); err == nil {
			syscall.Kill(pid, syscall.SIGCONT)
		}
		for _, r := range c.replicas {
			c.kill(r)
		}
		os.Exit(130)
	}()

	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "lincheck:", err)
		return 2
	}
	if err := cp.ensureNamespace(ctx, c.ns); err != nil {
		return fail(err)
	}
	cp.deleteCM(ctx, c.ns, "topogate-"+c.inventory)
	nodes := &nodeSet{absent: map[string]bool{}}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("lin-base-%d", i)
		if code, err := cp.createNode(ctx, name, "gpu"); err != nil || (code != 201 && code != 409) {
			return fail(fmt.Errorf("create Node %s: %d %v", name, code, err))
		}
		cp.labelNode(ctx, name, "gpu")
		nodes.base = append(nodes.base, name)
	}
	if c.pki, err = makePKI(*work); err != nil {
		return fail(err)
	}
	c.reader, c.writer = filepath.Join(*work, "reader.token"), filepath.Join(*work, "writer.token")
	if err := randomToken(c.reader); err != nil {
		return fail(err)
	}
	if err := randomToken(c.writer); err != nil {
		return fail(err)
	}
	if err := c.writeSource(); err != nil {
		return fail(err)
	}
	if err := c.setup(*nrep, logw); err != nil {
		return fail(err)
	}
	for _, r := range c.replicas {
		if err := c.waitReady(ctx, r, 30*time.Second); err != nil {
			return fail(err)
		}
	}

	h := &history{t0: time.Now()}
	w := &workload{c: c, h: h, nodes: nodes, seed: *seed, mode: *wl, readerTok: readToken(c.reader),
		writerTok: readToken(c.writer), reqTO: *timeout + 5*time.Second}
	sw := &storeWatch{}
	wctx, wcancel := context.WithCancel(ctx)
	var wwg sync.WaitGroup
	wwg.Add(1)
	go func() { defer wwg.Done(); cp.watchStore(wctx, c.ns, "topogate-"+c.inventory, h.now, sw) }()
	// The first revision, so that there is something to compare and set.
	first := w.httpClient(w.reqTO)
	for i := 0; i < 50; i++ {
		if o := w.pushBody(first, 0, 0, opPut, fmt.Sprintf("s%d-initial", *seed), snapshotJSON(fmt.Sprintf("s%d-initial", *seed), nodes.base), "", ""); o != nil && o.out == outOK {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	faults := schedule(*seed, kinds, *nrep, *duration-3*time.Second, *timeout)
	rn := &runner{c: c, w: w, h: h, nodes: nodes, counts: map[string]int{}}
	var cwg sync.WaitGroup
	client := 1
	spawn := func(f func(int)) {
		id := client
		client += 2
		cwg.Add(1)
		go func() { defer cwg.Done(); f(id) }()
	}
	if *wl == "pairs" {
		spawn(w.pairs)
		for r := 0; r < *nrep; r++ {
			rr := r
			spawn(func(id int) { w.reader(id, rr, 1, 5) })
			spawn(func(id int) { w.reader(id, rr, 1, 5) })
		}
	} else {
		for i := 0; i < *writers; i++ {
			spawn(w.writer)
		}
		for r := 0; r < *nrep; r++ {
			rr := r
			spawn(func(id int) { w.reader(id, rr, 30, 90) })
		}
	}
	spawn(func(id int) { w.storeReader(ctx, id) })
	for r := 0; r < *nrep; r++ {
		rr := r
		spawn(func(int) { w.admission(rr) })
	}
	fctx, fcancel := context.WithCancel(ctx)
	var fwg sync.WaitGroup
	fwg.Add(1)
	go func() { defer fwg.Done(); rn.run(fctx, h.t0, faults) }()
	time.Sleep(time.Until(h.t0.Add(*duration)))
	w.stop.Store(true)
	cwg.Wait()
	fcancel()
	fwg.Wait()
	workEnd := h.now()

	// P5: the faults are over; every replica must come to serve the store's revision.
	rn.heal(ctx)
	healed := h.now()
	p5 := "FAIL"
	settleNs := int64(math.MaxInt64)
	var p5detail string
	hc := w.httpClient(3 * time.Second)
	for deadline := time.Now().Add(*settle); ; {
		cm, err := cp.readCM(ctx, c.ns, "topogate-"+c.inventory)
		var served []string
		all := err == nil
		for ri := range c.replicas {
			g := w.getQuiet(hc, ri)
			served = append(served, fmt.Sprintf("%s=%s", c.replicas[ri].name, orNone(g)))
			all = all && g == cm.revision
		}
		p5detail = fmt.Sprintf("store %s, served %s", orNone(cm.revision), strings.Join(served, " "))
		if all {
			p5 = "PASS"
			settleNs = h.now() - healed
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the store watch catches up
	wcancel()
	wwg.Wait()
	for _, n := range nodes.fresh {
		cp.deleteNode(ctx, n)
	}

	// ---- the checks
	h.mu.Lock()
	ops := append([]*op(nil), h.ops...)
	h.mu.Unlock()
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].call < ops[j].call })
	// An indeterminate push whose revision reached no apiserver (no proxy transmitted a write
	// carrying it) did not take effect: it leaves the history.
	notSent := 0
	{
		kept := ops[:0]
		for _, o := range ops {
			if o.out == outUnk && (o.kind == opPut || o.kind == opCAS) {
				sent := false
				for _, r := range c.replicas {
					sent = sent || r.proxy.wasSent(o.value)
				}
				if !sent {
					notSent++
					continue
				}
			}
			kept = append(kept, o)
		}
		ops = kept
	}
	var writesAndReads []*op
	nWrites, nUnk := 0, 0
	for _, o := range ops {
		if o.isWrite() {
			nWrites++
			if o.out == outUnk {
				nUnk++
			}
		}
		if o.isWrite() || o.kind == opRead {
			writesAndReads = append(writesAndReads, o)
		}
	}
	end := workEnd + int64(time.Second)
	verdicts := map[string]string{}
	var report strings.Builder
	fmt.Fprintf(&report, "lincheck: seed %d, plan %s (%s), workload %s, %d replicas, %s, binary %s\n",
		*seed, *planName, strings.Join(kinds, ","), *wl, *nrep, *duration, *binary)
	fmt.Fprintf(&report, "operations %d (writes %d, indeterminate %d; left out: %d refused before the store or not sent, %d indeterminate that reached no apiserver)\n",
		len(ops), nWrites, nUnk, w.skipped.Load(), notSent)
	fmt.Fprintf(&report, "fault schedule (%d):\n", len(faults))
	for _, f := range faults {
		fmt.Fprintf(&report, "  %s\n", f)
	}

	fmt.Print(report.String())
	printed := report.Len()
	histPath := filepath.Join(*artifacts, fmt.Sprintf("lincheck-%d.history.txt", *seed))
	events := sw.snapshot()
	writeHistory(histPath, ops, events, rn.log)

	p1 := checkLin(writesAndReads, end, 0, *checkTO, nil)
	verdicts["P1"] = p1.verdict
	fmt.Fprintf(&report, "P1 writes and store reads linearizable: %s (%d operations) %s\n", p1.verdict, p1.ops, p1.note)
	if p1.verdict == "FAIL" {
		writeVisualization(filepath.Join(*artifacts, fmt.Sprintf("lincheck-%d-P1.html", *seed)), p1, &report)
		fmt.Fprintf(&report, "  shortest failing history (%d operations):\n%s", len(p1.shortest), joinOps(p1.shortest, "    "))
	}

	var storeReads []*op
	for _, o := range ops {
		if o.kind == opRead {
			storeReads = append(storeReads, o)
		}
	}
	windows := faultWindows(faults, *nrep, *grace, *cpGrace)
	p2 := "PASS"
	for r := 0; r < *nrep; r++ {
		var hist []*op
		excluded := 0
		for _, o := range ops {
			if o.isWrite() {
				hist = append(hist, o)
			} else if o.kind == opGet && o.replica == r {
				if inWindow(windows[r], o.call, o.ret) || o.ret > workEnd {
					excluded++
					continue
				}
				hist = append(hist, o)
			}
		}
		res := checkLin(hist, end, *stale, *checkTO, storeReads)
		fmt.Fprintf(&report, "P2 replica %s GETs linearizable within %s: %s (%d operations, %d GETs in fault windows not held to it) %s\n",
			c.replicas[r].name, *stale, res.verdict, res.ops, excluded, res.note)
		if res.verdict == "FAIL" {
			writeVisualization(filepath.Join(*artifacts, fmt.Sprintf("lincheck-%d-P2-%s.html", *seed, c.replicas[r].name)), res, &report)
			fmt.Fprintf(&report, "  shortest failing history (%d operations):\n%s", len(res.shortest), joinOps(res.shortest, "    "))
		}
		p2 = worse(p2, res.verdict)
	}
	verdicts["P2"] = p2

	so := buildOrder(events, ops)
	p3v := checkMonotonic(ops, so, *nrep)
	verdicts["P3"] = verdictOf(p3v)
	fmt.Fprintf(&report, "P3 per replica reads never go backwards, clients read their own writes: %s (store order: %d events, %d lists)\n",
		verdictOf(p3v), len(events), sw.relist)
	printViolations(&report, p3v, events, so)
	p4v := checkServed(ops, so)
	verdicts["P4"] = verdictOf(p4v)
	fmt.Fprintf(&report, "P4 every served revision was the store's: %s\n", verdictOf(p4v))
	printViolations(&report, p4v, events, so)
	verdicts["P5"] = p5
	fmt.Fprintf(&report, "P5 every replica serves the store's revision within %s of the faults' end: %s (%s; %s)\n",
		*settle, p5, fmtDur(settleNs), p5detail)
	w.admMu.Lock()
	fmt.Fprintf(&report, "admission: %d reviews, %d failed, slowest %.3f s (%s)\n", w.admN, w.admBad, w.admMax.Seconds(), w.admWorst)
	w.admMu.Unlock()
	var px []string
	for _, r := range c.replicas {
		p := r.proxy
		px = append(px, fmt.Sprintf("%s: requests cm-watch %d node-watch %d cm-write %d other %d, cut %d, answers dropped %d delayed %d, 410 %d, kills %d restarts %d",
			r.name, p.requests[kindCMWatch].Load(), p.requests[kindNodeWatch].Load(), p.requests[kindCMWrite].Load(),
			p.requests[kindOther].Load(), p.cuts.Load(), p.dropped.Load(), p.delayed.Load(), p.gone410.Load(), r.kills, r.restarts))
	}
	fmt.Fprintf(&report, "proxies:\n  %s\n", strings.Join(px, "\n  "))

	fmt.Fprintf(&report, "history: %s\n", histPath)

	overall := "PASS"
	for _, p := range []string{"P1", "P2", "P3", "P4", "P5"} {
		overall = worse(overall, verdicts[p])
	}
	fmt.Fprintf(&report, "verdict: %s (P1 %s, P2 %s, P3 %s, P4 %s, P5 %s)\n", overall,
		verdicts["P1"], verdicts["P2"], verdicts["P3"], verdicts["P4"], verdicts["P5"])
	fmt.Print(report.String()[printed:])
	os.WriteFile(filepath.Join(*artifacts, fmt.Sprintf("lincheck-%d.report.txt", *seed)), []byte(report.String()), 0o644)

	if *sumFile != "" {
		w.admMu.Lock()
		s := summary{Seed: *seed, Plan: *planName, Workload: *wl, Replicas: *nrep, DurationS: duration.Seconds(),
			Ops: len(ops), Writes: nWrites, Indeterminate: nUnk, Skipped: w.skipped.Load(), Faults: faultCounts(faults),
			Verdicts: verdicts, AdmissionMaxS: w.admMax.Seconds(), AdmissionN: w.admN, AdmissionBad: w.admBad,
			StaleS: stale.Seconds(), Binary: *binary}
		w.admMu.Unlock()
		if settleNs != math.MaxInt64 {
			s.SettleS = float64(settleNs) / 1e9
		} else {
			s.SettleS = -1
		}
		b, _ := json.Marshal(s)
		f, err := os.OpenFile(*sumFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			f.Write(append(b, '\n'))
			f.Close()
		}
	}
	switch overall {
	case "FAIL":
		return 1
	case "UNKNOWN":
		return 3 // the checker did not finish: not a pass
	}
	return 0
}

func writeHistory(path string, ops []*op, events []storeEvent, faultLog []string) {
	var hb strings.Builder
	hb.WriteString(joinOps(ops, ""))
	hb.WriteString("---- the store's order (the harness's own watch)\n")
	for _, e := range events {
		fmt.Fprintf(&hb, "%8.3f rv %d %s (%s)\n", float64(e.t)/1e9, e.rv, orNone(e.revision), e.via)
	}
	hb.WriteString("---- faults\n" + strings.Join(faultLog, "\n") + "\n")
	os.WriteFile(path, []byte(hb.String()), 0o644)
}

func worse(a, b string) string {
	rank := map[string]int{"PASS": 0, "SKIP": 0, "UNKNOWN": 1, "FAIL": 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func verdictOf(v []violation) string {
	if len(v) == 0 {
		return "PASS"
	}
	return "FAIL"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func printViolations(b *strings.Builder, vs []violation, events []storeEvent, so storeOrder) {
	for _, v := range vs {
		fmt.Fprintf(b, "  %s\n%s", v.what, joinOps(v.ops, "    "))
		// the store's order around the revisions involved
		lo, hi := len(events), -1
		for _, o := range v.ops {
			if p, ok := so.pos[o.value]; ok {
				lo, hi = min(lo, p), max(hi, p)
			}
		}
		if hi >= 0 {
			for i := max(lo-1, 0); i <= min(hi+1, len(events)-1); i++ {
				e := events[i]
				fmt.Fprintf(b, "    store: %8.3f rv %d %s\n", float64(e.t)/1e9, e.rv, orNone(e.revision))
			}
		}
	}
}

func writeVisualization(path string, r linResult, b *strings.Builder) {
	if err := porcupine.VisualizePath(registerModel, r.info, path); err == nil {
		fmt.Fprintf(b, "  visualization: %s\n", path)
	}
}

func table(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: lincheck table SUMMARY_FILE")
		return 2
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Printf("%-6s %-12s %-8s %4s %5s %5s %5s %-4s %-4s %-4s %-4s %-4s %7s %8s  %s\n",
		"seed", "plan", "workload", "rep", "ops", "wr", "indet", "P1", "P2", "P3", "P4", "P5", "settle", "adm.max", "faults")
	fails := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var s summary
		if json.Unmarshal([]byte(line), &s) != nil {
			continue
		}
		v := s.Verdicts
		for _, p := range []string{"P1", "P2", "P3", "P4", "P5"} {
			if v[p] == "FAIL" {
				fails++
				break
			}
		}
		settle := "-"
		if s.SettleS >= 0 {
			settle = fmt.Sprintf("%.1fs", s.SettleS)
		}
		fmt.Printf("%-6d %-12s %-8s %4d %5d %5d %5d %-4s %-4s %-4s %-4s %-4s %7s %7.3fs  %s\n",
			s.Seed, s.Plan, s.Workload, s.Replicas, s.Ops, s.Writes, s.Indeterminate, v["P1"], v["P2"], v["P3"], v["P4"], v["P5"],
			settle, s.AdmissionMaxS, s.Faults)
	}
	if fails > 0 {
		return 1
	}
	return 0
}
