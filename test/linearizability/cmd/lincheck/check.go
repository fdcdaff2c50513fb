package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The register: its state is the stored revision ("" = no ConfigMap). An ETag names a
// revision (distinct revisions have distinct ETags: the revision is part of the content),
// so a cas carries the revision whose ETag it sent.
type regIn struct {
	kind   string
	value  string
	expect string
}

type regOut struct {
	out   string
	value string // reads
}

var registerModel = porcupine.Model{
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(string), input.(regIn), output.(regOut)
		switch in.kind {
		case opPut, opEdit:
			return true, in.value
		case opDel:
			return true, ""
		case opCAS:
			switch out.out {
			case outOK:
				return s == in.expect, in.value
			case outFail:
				return s != in.expect, s
			default: // unknown: took effect here if it could, or (linearized at the end) never
				if s == in.expect {
					return true, in.value
				}
				return true, s
			}
		default: // get, store read
			return out.value == s, s
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regIn), output.(regOut)
		switch in.kind {
		case opCAS:
			return fmt.Sprintf("cas(%s → %s) %s", in.expect, in.value, out.out)
		case opPut, opEdit:
			return fmt.Sprintf("%s(%s) %s", in.kind, in.value, out.out)
		case opDel:
			return "del " + out.out
		}
		return fmt.Sprintf("%s → %s", in.kind, out.value)
	},
	DescribeState: func(state any) string {
		if state.(string) == "" {
			return "(none)"
		}
		return state.(string)
	},
}

// toPorcupine turns recorded operations into Porcupine's. An indeterminate write returns
// at the end of the history, or at the return of the first operation that observed its
// revision (it must have taken effect by then: revisions are unique). bounded also ends
// it at the return of the first acknowledged write called after it returned: every store
// write is conditional on the resourceVersion the replica saw, so a write still in flight
// at the apiserver cannot land after another write has. widen moves the call of every
// get back by that much.
func toPorcupine(ops []*op, end int64, widen time.Duration, bounded bool) []porcupine.Operation {
	firstSeen := map[string]int64{}
	var acked []*op // acknowledged writes, by call
	for _, o := range ops {
		if (o.kind == opGet || o.kind == opRead) && o.value != "" {
			if t, ok := firstSeen[o.value]; !ok || o.ret < t {
				firstSeen[o.value] = o.ret
			}
		}
		if (o.kind == opPut || o.kind == opCAS || o.kind == opEdit) && o.out == outOK {
			acked = append(acked, o)
		}
	}
	sort.Slice(acked, func(i, j int) bool { return acked[i].call < acked[j].call })
	// suffixMin[i]: the earliest return among acked[i:].
	suffixMin := make([]int64, len(acked)+1)
	suffixMin[len(acked)] = math.MaxInt64
	for i := len(acked) - 1; i >= 0; i-- {
		suffixMin[i] = min(acked[i].ret, suffixMin[i+1])
	}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		ret := o.ret
		if o.out == outUnk {
			ret = end
			if t, ok := firstSeen[o.value]; ok && t >= o.call && t < ret {
				ret = t
			}
			if bounded && o.ret > 0 {
				i := sort.Search(len(acked), func(i int) bool { return acked[i].call > o.ret })
				if t := suffixMin[i]; t < ret && t >= o.call {
					ret = t
				}
			}
		}
		call := o.call
		if o.kind == opGet {
			call -= widen.Nanoseconds()
		}
		client := o.client
		if client < 0 {
			client = 0
		}
		out = append(out, porcupine.Operation{
			ClientId: client, Call: call, Return: ret,
			Input:    regIn{o.kind, o.value, o.expect},
			Output:   regOut{o.out, o.value},
			Metadata: o.String(),
		})
	}
	return out
}

type linResult struct {
	verdict  string // PASS, FAIL, UNKNOWN (checker timed out)
	ops      int
	shortest []*op
	info     porcupine.LinearizationInfo
	note     string
}

type linCheck struct {
	end     int64
	widen   time.Duration
	bounded bool
	timeout time.Duration
}

// checkLin checks first with indeterminate writes bounded (fast; a pass then is a pass with
// them open too, since bounding only removes orders), then, unless that passed, with them
// open to the end of the history. A failure found only with them bounded says so.
func checkLin(ops []*op, end int64, widen time.Duration, timeout time.Duration, hints []*op) linResult {
	t := time.Now()
	r := linResult{ops: len(ops)}
	lc := linCheck{end: end, widen: widen, timeout: timeout, bounded: true}
	res, info := porcupine.CheckOperationsVerbose(registerModel, toPorcupine(ops, end, widen, true), timeout)
	if res != porcupine.Ok {
		open, oinfo := porcupine.CheckOperationsVerbose(registerModel, toPorcupine(ops, end, widen, false), timeout)
		switch {
		case open != porcupine.Unknown:
			res, info, lc.bounded = open, oinfo, false
		case res == porcupine.Illegal:
			r.note = "(illegal with indeterminate writes bounded by the next acknowledged write; with them open the search timed out)"
		}
	}
	r.info = info
	switch res {
	case porcupine.Ok:
		r.verdict = "PASS"
	case porcupine.Illegal:
		r.verdict = "FAIL"
		var n string
		r.shortest, n = lc.shortest(ops, hints)
		r.note = strings.TrimSpace(r.note + " " + n)
	default:
		r.verdict = "UNKNOWN"
		r.note = strings.TrimSpace(r.note + " checker timed out")
	}
	r.note = strings.TrimSpace(r.note + fmt.Sprintf(" [checked in %.1f s]", time.Since(t).Seconds()))
	return r
}

func (lc linCheck) illegal(ops []*op, end int64, init string) bool {
	m := registerModel
	m.Init = func() any { return init }
	return porcupine.CheckOperationsTimeout(m, toPorcupine(ops, end, lc.widen, lc.bounded), 3*time.Second) == porcupine.Illegal
}

// truncateAt is the history as it stood at time t: operations called by t, those still
// running then indeterminate (a write) or dropped (a read).
func truncateAt(ops []*op, t int64) []*op {
	var out []*op
	for _, o := range ops {
		if o.call > t {
			continue
		}
		if o.ret > t || o.out == outUnk {
			if !o.isWrite() {
				continue
			}
			c := *o
			if c.out != outUnk {
				c.out, c.err = outUnk, "running at the cut"
			}
			out = append(out, &c)
			continue
		}
		out = append(out, o)
	}
	return out
}

// constraint: an operation that changes nothing (a read, a 412), which may be dropped
// without making a linearizable history illegal.
func constraint(o *op) bool { return !o.isWrite() || o.kind == opCAS && o.out == outFail }

// shortest finds a small witness, by steps that keep a linearizable history linearizable
// (so what is left is illegal only because the history was):
//  1. the earliest cut of the history that is still illegal (a history cut at t, with
//     what was running then indeterminate, is linearizable if the whole one is);
//  2. the latest quiet store read before it (no write running or pending across it) from
//     which on the cut is still illegal, its revision as the initial state;
//  3. without every read and 412 it does not need.
func (lc linCheck) shortest(ops []*op, hints []*op) ([]*op, string) {
	end := lc.end
	deadline := time.Now().Add(45 * time.Second)
	lo, hi := int64(0), end
	for hi-lo > int64(time.Millisecond) && time.Now().Before(deadline) {
		mid := lo + (hi-lo)/2
		if lc.illegal(truncateAt(ops, mid), mid, "") {
			hi = mid
		} else {
			lo = mid
		}
	}
	cur, curEnd := ops, end
	if hi < end {
		cur, curEnd = truncateAt(ops, hi), hi
	}
	init := ""
	var quiet []*op
	for _, o := range append(append([]*op(nil), cur...), hints...) {
		if o.kind != opRead || o.ret > curEnd {
			continue
		}
		calm := true
		for _, w := range cur {
			if !w.isWrite() {
				continue
			}
			wret := w.ret
			if w.out == outUnk {
				wret = curEnd
			}
			if w.call <= o.ret && wret >= o.call {
				calm = false
				break
			}
		}
		if calm {
			quiet = append(quiet, o)
		}
	}
	sort.Slice(quiet, func(i, j int) bool { return quiet[i].call > quiet[j].call })
	for k, q := range quiet {
		if k > 200 || !time.Now().Before(deadline) {
			break
		}
		var suffix []*op
		for _, o := range cur {
			if o.call > q.ret && o != q {
				suffix = append(suffix, o)
			}
		}
		if lc.illegal(suffix, curEnd, q.value) {
			cur, init = append([]*op{q}, suffix...), q.value
			break
		}
	}
	for chunk := len(cur) / 2; chunk >= 1 && time.Now().Before(deadline); chunk /= 2 {
		for start := 0; start < len(cur) && time.Now().Before(deadline); {
			var cand []*op
			for i, o := range cur {
				if !constraint(o) || i < start || i >= start+chunk || (init != "" && i == 0) {
					cand = append(cand, o)
				}
			}
			if len(cand) < len(cur) && lc.illegal(cand, curEnd, init) {
				cur = cand
			} else {
				start += chunk
			}
		}
	}
	sort.SliceStable(cur, func(i, j int) bool { return cur[i].call < cur[j].call })
	note := ""
	if init != "" {
		note = "from the quiet store read of " + init + " on (the register holds it then)"
	}
	return cur, note
}

// ---- P3, P4: the store's order

type storeOrder struct {
	pos   map[string]int
	since map[string]int64 // when the harness first knew it was stored
}

func buildOrder(events []storeEvent, ops []*op) storeOrder {
	so := storeOrder{pos: map[string]int{}, since: map[string]int64{}}
	for i, e := range events {
		if e.revision == "" {
			continue
		}
		if _, ok := so.pos[e.revision]; !ok {
			so.pos[e.revision] = i
			so.since[e.revision] = e.t
		}
	}
	// Acknowledged writes and direct store reads also prove a revision was stored.
	for _, o := range ops {
		if (o.isWrite() && o.out == outOK && o.kind != opDel) || (o.kind == opRead && o.value != "") {
			if t, ok := so.since[o.value]; !ok || o.call < t {
				so.since[o.value] = o.call
			}
		}
	}
	return so
}

type violation struct {
	what string
	ops  []*op
}

// checkMonotonic (P3): per replica, a get that started after another returned never serves
// an older revision in the store's order; a client's get from the replica that acknowledged
// its write serves that write or a later revision.
func checkMonotonic(ops []*op, so storeOrder, replicas int) []violation {
	var out []violation
	byID := map[int]*op{}
	for _, o := range ops {
		byID[o.id] = o
	}
	for r := 0; r < replicas; r++ {
		var gets []*op
		for _, o := range ops {
			if o.kind == opGet && o.replica == r {
				if _, ok := so.pos[o.value]; ok {
					gets = append(gets, o)
				}
			}
		}
		byRet := append([]*op(nil), gets...)
		sort.Slice(byRet, func(i, j int) bool { return byRet[i].ret < byRet[j].ret })
		sort.Slice(gets, func(i, j int) bool { return gets[i].call < gets[j].call })
		j := 0
		var best *op // the returned get with the latest revision in store order
		reported := 0
		seen := map[string]bool{}
		for _, g := range gets {
			for j < len(byRet) && byRet[j].ret < g.call {
				if best == nil || so.pos[byRet[j].value] > so.pos[best.value] {
					best = byRet[j]
				}
				j++
			}
			if best != nil && so.pos[g.value] < so.pos[best.value] && reported < 3 {
				key := best.value + " " + g.value
				if seen[key] {
					continue
				}
				seen[key] = true
				// The witness: the writes of both revisions and the two reads.
				wit := append(writesOf(ops, g.value, best.value), best, g)
				sort.SliceStable(wit, func(i, j int) bool { return wit[i].call < wit[j].call })
				out = append(out, violation{
					fmt.Sprintf("replica %c served %s after it had served %s (later in the store's order)", 'A'+r, g.value, best.value),
					wit})
				reported++
			}
		}
	}
	reported := 0
	for _, o := range ops {
		if o.kind != opGet || o.ryw < 0 {
			continue
		}
		w := byID[o.ryw]
		if w == nil {
			continue
		}
		pw, ok1 := so.pos[w.value]
		pg, ok2 := so.pos[o.value]
		if o.value != w.value && (!ok1 || !ok2 || pg < pw) && reported < 5 {
			out = append(out, violation{
				fmt.Sprintf("client %d did not read its own acknowledged write %s from replica %c: got %s", o.client, w.value, 'A'+o.replica, o.value),
				[]*op{w, o}})
			reported++
		}
	}
	return out
}

func writesOf(ops []*op, values ...string) []*op {
	var out []*op
	for _, o := range ops {
		if o.isWrite() && slices.Contains(values, o.value) {
			out = append(out, o)
		}
	}
	return out
}

// checkServed (P4): every served revision was stored, and not before its write was called.
func checkServed(ops []*op, so storeOrder) []violation {
	var out []violation
	for _, o := range ops {
		if o.kind != opGet {
			continue
		}
		t, ok := so.since[o.value]
		if !ok {
			out = append(out, violation{fmt.Sprintf("replica %c served %s, never the store's revision", 'A'+o.replica, o.value), []*op{o}})
		} else if t > o.ret && !inStoreEvents(so, o.value) {
			out = append(out, violation{fmt.Sprintf("replica %c served %s before it was written", 'A'+o.replica, o.value), []*op{o}})
		}
		if len(out) >= 5 {
			break
		}
	}
	return out
}

func inStoreEvents(so storeOrder, v string) bool { _, ok := so.pos[v]; return ok }

// faultWindows: per replica, the intervals in which its reads are not held to the staleness
// bound (a fault on it or on the control plane, and the grace after it).
func faultWindows(fs []*fault, replicas int, grace, cpGrace time.Duration) [][][2]int64 {
	w := make([][][2]int64, replicas)
	for _, f := range fs {
		if f.start == 0 {
			continue
		}
		g := grace
		switch f.kind {
		case fAPIKill, fEtcdStop, fCompact, fReplicaKill, fRolling, fBlackhole, fWriteDrop, fWriteDelay:
			g = cpGrace
		case fCMDelete, fCMEdit:
			continue // writes by hand, not faults of a replica's view
		}
		for r := 0; r < replicas; r++ {
			if f.replica >= 0 && f.replica != r && f.kind != fNodeRelabel {
				continue
			}
			w[r] = append(w[r], [2]int64{f.start, f.end + g.Nanoseconds()})
		}
	}
	return w
}

func inWindow(ws [][2]int64, a, b int64) bool {
	for _, w := range ws {
		if a <= w[1] && b >= w[0] {
			return true
		}
	}
	return false
}

func fmtDur(ns int64) string {
	if ns == math.MaxInt64 {
		return "never"
	}
	return fmt.Sprintf("%.1f s", float64(ns)/1e9)
}

func joinOps(ops []*op, indent string) string {
	var b strings.Builder
	for _, o := range ops {
		b.WriteString(indent + o.String() + "\n")
	}
	return b.String()
}
