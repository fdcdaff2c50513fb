"""The change cases' verdict (tas-differential.sh --changes, read by report.py): each case's
result (RESULTS/change-<i>.jsonl, .rc, .err from `tas-lab.sh change`) against the generated
case (CASES_DIR/change-<seed>-<i>.json). Per Workload of a case, `diagnose change`'s
prediction (not evicted, evicted and admitted again, evicted and stranded) against what Kueue
did during the lab's migration; every disagreement with its replay command, and the change
agreement table, in total and per trait (generate.py change_case). The change cases hold
when:

- every case ran (`tas-lab.sh change` exit 0: the profile impact matched the Nodes
  relabelled, the queue kept its identity and drained when its flavor set changed) and
  printed a prediction (no error) and an agreement line;
- every disagreement falls in a named class (CLASSES, docs/operations.md);
- the Workloads that agreed are at least --min-agreed of the Workloads generated.
"""
import collections
import json
import os

NOT_EVICTED, AGAIN, STRANDED = "not evicted", "admitted again", "stranded"

# The named classes of a disagreement between `diagnose change` and Kueue: what Kueue does
# that the prediction cannot know. Each is a function of the Workload's disagreement
# (predicted, observed) and its case's lines; docs/operations.md explains each.
PREEMPTION = "preemption: admitted again by preempting, which diagnose change counts as stranded"


def by_preemption(w, predicted, observed, lines):
    """Predicted stranded, observed admitted again, and the prediction noted that Kueue would
    preempt for W: `diagnose change` does not model a readmission by preemption."""
    notes = next((l.get("notes") or [] for l in lines if l.get("phase") == "prediction"), [])
    return predicted == STRANDED and observed == AGAIN and \
        any(n.startswith(f"{w}: Kueue would preempt") for n in notes)


HEAD_OF_LINE = "head of line: a Workload of several PodSets ahead is retried at once, this one never"


def by_head_of_line(w, predicted, observed, lines):
    """Predicted admitted again, observed stranded, and Kueue never tried W after the queue was
    restored (its QuotaReserved message is still the drain's "ClusterQueue ... is inactive"),
    while a Workload ahead of it in Kueue's order (the prediction's order) with several
    PodSets stays Pending. Kueue v0.17.0 requeues a Workload at once, not as inadmissible,
    while its flavor search state has a flavor left to try (LastTriedFlavorIdx, PendingFlavors);
    with several PodSets, one of them can stop on a fitting flavor before the last every cycle,
    so that Workload is the head of the ClusterQueue forever and the ones after it wait."""
    if not (predicted == AGAIN and observed == STRANDED):
        return False
    after = {l["workload"]: l for l in lines if l.get("phase") == "after-change"}
    order = list(next((l.get("workloads") or {} for l in lines if l.get("phase") == "prediction"), {}))
    mine = after.get(w)
    if not mine or "is inactive" not in (mine["kueue"].get("message") or "") or w not in order:
        return False
    return any(a in after and after[a]["kueue"]["decision"] == "pending" and
               len(after[a]["diagnose"].get("podSets") or []) > 1 for a in order[:order.index(w)])


CLASSES = [(PREEMPTION, by_preemption), (HEAD_OF_LINE, by_head_of_line)]


def classify(w, predicted, observed, lines):
    for name, test in CLASSES:
        if test(w, predicted, observed, lines):
            return name
    return None


def replay_line(seed, i, change):
    """The commands that replay case I alone (a change case when CHANGE)."""
    kind, cmd = ("change", "change") if change else ("case", "run")
    return (f"  replay: python3 test/e2e/tas/generate.py --seed {seed}{' --changes' if change else ''} --only {i}"
            f" --out /tmp/cases && scripts/tas-lab.sh {cmd} /tmp/cases/{kind}-{seed}-{i}.json")


def print_failures(failures, seed, change):
    for i, what in failures:
        print(f"FAIL {'change case' if change else 'case'} {i}: {what}")
        print(replay_line(seed, i, change))


def states(sets, workloads):
    """{Workload: state} from an agreement line's predicted or observed sets."""
    out = {}
    for w in workloads:
        if w in sets.get("admittedAgain", []):
            out[w] = AGAIN
        elif w in sets.get("stranded", []):
            out[w] = STRANDED
        else:
            out[w] = NOT_EVICTED
    return out


def report(a):
    failures = []
    rows = []  # (case index, Workload, traits, predicted, observed, lines)
    expected = 0
    for i in range(a.changes):
        name = f"change-{a.seed}-{i}"
        case = json.load(open(os.path.join(a.cases_dir, f"{name}.json")))
        ws = {f"default/{w['name']}": w.get("traits") or ["plain"] for w in case["workloads"]}
        expected += len(ws)
        base = os.path.join(a.results, f"change-{i}")
        rc = open(base + ".rc").read().strip() if os.path.exists(base + ".rc") else None
        err = open(base + ".err").read().strip().splitlines() if os.path.exists(base + ".err") else []
        if rc is None:
            failures.append((i, "no result: the case did not run to its end"))
        elif rc != "0":
            what = "the impact, the queue or an expectation not met" if rc == "3" else "failed to run"
            failures.append((i, f"tas-lab.sh change exit {rc} ({what}): {' '.join(err[-3:])}"))
        lines = []
        if os.path.exists(base + ".jsonl"):
            lines = [json.loads(t) for t in open(base + ".jsonl") if t.strip()]
        pred = [l for l in lines if l.get("phase") == "prediction"]
        agree = [l for l in lines if l.get("phase") == "agreement"]
        if len(pred) != 1 or pred[0].get("error"):
            failures.append((i, "no prediction: " + ((pred or [{}])[0].get("error") or "no line")[:200]))
            continue
        if len(agree) != 1:
            failures.append((i, "no agreement line"))
            continue
        ag = agree[0]
        for side in ("predicted", "observed"):
            extra = set().union(*(set(v) for v in ag[side].values())) - set(ws)
            if extra:
                failures.append((i, f"{side}: Workloads the case does not hold: {sorted(extra)}"))
        p, o = states(ag["predicted"], ws), states(ag["observed"], ws)
        for w, traits in ws.items():
            rows.append((i, w, traits, p[w], o[w], lines, rc == "0"))

    def replay(i):
        return replay_line(a.seed, i, True)

    print_failures(failures, a.seed, True)
    unclassified = 0
    classes = collections.Counter()
    by_trait = collections.OrderedDict()
    total = [0, collections.Counter(), collections.Counter(), 0, collections.Counter()]
    for i, w, traits, p, o, lines, ran in rows:
        if not ran:  # a failure already: its Workloads count as not agreed, not as a class
            continue
        c = None
        if p != o:
            c = classify(w, p, o, lines)
            if c:
                classes[c] += 1
            else:
                unclassified += 1
            print(f"disagree change-{a.seed}-{i} {w}: predicted {p}, observed {o} -> {c or 'UNCLASSIFIED'}")
            print(replay(i))
        for row in [total] + [by_trait.setdefault(t, [0, collections.Counter(), collections.Counter(), 0,
                                                      collections.Counter()]) for t in traits]:
            row[0] += 1
            row[1][p] += 1
            row[2][o] += 1
            if p == o:
                row[3] += 1
            else:
                row[4][c or "unclassified"] += 1
    agreed = total[3]
    floor = a.min_agreed * expected
    print()
    print(f"| seed {a.seed}, change cases | count |")
    print("|---|---|")
    print(f"| change cases | {a.changes} |")
    print(f"| Workloads generated | {expected} |")
    print(f"| Workloads with a prediction and an observation | {sum(1 for r in rows if r[-1])} |")
    print(f"| agreed | {agreed} (floor {a.min_agreed:.0%}: {floor:.0f}) |")
    for c, n in classes.most_common():
        print(f"| disagreement: {c} | {n} |")
    print(f"| disagreement: unclassified | {unclassified} |")
    print(f"| failures (cases not run, exit non-zero, no prediction or agreement) | {len(failures)} |")
    print()
    print("| trait | Workloads | evicted (predicted / observed) | admitted again | stranded | agreed | disagreements |")
    print("|---|---|---|---|---|---|---|")

    def line(t, row):
        n, pc, oc, ag, cl = row
        ev = (pc[AGAIN] + pc[STRANDED], oc[AGAIN] + oc[STRANDED])
        dis = ", ".join(f"{c} {k}" for c, k in cl.most_common()) or "-"
        print(f"| {t} | {n} | {ev[0]} / {ev[1]} | {pc[AGAIN]} / {oc[AGAIN]} | {pc[STRANDED]} / {oc[STRANDED]}"
              f" | {ag} | {dis} |")
    for t, row in sorted(by_trait.items()):
        line(t, row)
    line("**total**", total)
    ok = not failures and not unclassified and expected > 0 and agreed >= floor
    if agreed < floor:
        print(f"FAIL change agreement {agreed}/{expected} is below the floor of {a.min_agreed:.0%}")
    return ok
