"""The TAS lab: Kueue's real controller manager deciding Topology-Aware Scheduling
admissions on a local control plane, with topology labels delivered the way
production does (topogate serves a snapshot; a consumer reads it over HTTPS and
labels the Nodes with it and their profile), so that `topogate diagnose` can be
held to what Kueue decides. See docs/operations.md ("The TAS lab").

Usage: tas-lab.sh up [SCENARIO.json]   start (idempotent) and load the base inventory
                                      (default test/e2e/tas/eks-validation.json,
                                      its Nodes and chain only); prints export KUBECONFIG=...
       tas-lab.sh run [--keep] SCENARIO.json
                                      replace the loaded inventory with the scenario's,
                                      create its Workloads, wait for Kueue, run
                                      `topogate diagnose pending` for each, print one JSON
                                      line per Workload, remove the scenario's objects
                                      (--keep leaves them). Exit 3 when an `expect` of the
                                      scenario is not met.
       tas-lab.sh change [--keep] SCENARIO.json
                                      the runbook's live hierarchy change, rehearsed: run's
                                      steps, then `diagnose change`'s prediction (before the
                                      change), the scenario's `change` published through
                                      topogate; prints the profile impact against the Nodes
                                      relabelled, and which Workloads Kueue evicted and
                                      readmitted, then the prediction against them (`agree`;
                                      exit 3 when the impact and the cluster disagree or an
                                      expectation is not met)
       tas-lab.sh dump DIR            the loaded scenario's objects (after run --keep) as
                                      `kubectl get -o json` lists, one file a kind, for
                                      `topogate diagnose --from DIR` (the fixtures of
                                      test/fixtures/diagnose/kueue-*)
       tas-lab.sh nfd start|stop     start or stop nfd-master alone (TAS_LAB_NFD_FLAGS)
       tas-lab.sh relabel            the labeler once more, against the snapshot topogate serves
       tas-lab.sh status | down | env

Pieces (all under the state directory, nothing else on the machine is changed):
  control plane   test/e2e/control-plane.sh start (etcd + kube-apiserver), own TOPOGATE_CP_DIR
  Kueue           the manager built by test/e2e/build-kueue.sh (pinned sigs.k8s.io/kueue),
                  its CRDs from the same module, run as a local process: leader election
                  off, its webhooks served on 127.0.0.1 with a certificate from certs/ and
                  registered with the apiserver by URL (so defaulting and validation happen
                  as in production), metrics and health on free local ports
  Nodes           Node objects whose status (capacity, allocatable, Ready) is set through
                  the status subresource; no kubelet. Existing usage = Pods bound to a
                  Node (spec.nodeName), which Kueue's TAS and diagnose both count
  topogate        `topogate serve` with the scenario's TopologySource and snapshot
  NFD             the real nfd-master built by test/e2e/build-nfd.sh, its CRDs from the same
                  module, run as a local process (-kubeconfig, its HTTP port free, NODE_NAME a
                  Node that exists while it starts); TAS_LAB_NFD_FLAGS adds flags
  labeler         conformance/labeler: reads the snapshot over HTTPS with the conformance
                  consumer, takes the profile topogate computed, writes the consumer's
                  NodeFeatures (gpustack-system), waits until nfd-master applied them
                  (TAS_LAB_NFD_WAIT s, default 60), then the profile label on the Nodes
Env: TAS_LAB_DIR (state; default ${TMPDIR:-/tmp}/topogate-tas-lab-$UID), TOPOGATE_BINARY,
     TOPOGATE_CACHE, TAS_LAB_TIMEOUT (readiness deadline, default 180 s),
     TAS_LAB_DRIFT_GRACE (topogate's driftGracePeriod for the lab inventory, default 5m).
"""
import json
import os
import shutil
import subprocess
import sys
import time

# kueue and kube import the Kubernetes client (a third of a second of CPU): the commands
# that reach the API import them, `down`, `env` and the usage do not.
from . import cluster, objects, record, scenario
from .cluster import Failed, Lab, alive, log, read, stop_pid, write

BASE_SCENARIO = os.path.join(cluster.E2E, "tas", "eks-validation.json")


class Exit(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


def load(lab, s, path):
    """Replace the loaded inventory with scenario S's: Nodes, topogate, the labeler, the chain."""
    from . import kueue
    api = lab.api
    d = lab.path("topogate")
    os.makedirs(d, exist_ok=True)
    objects.unload(api)
    rev = objects.write_inventory(s, d)
    objects.create_nodes(api, s)
    lab.start_topogate()
    write(f"{d}/source", objects.apply_topology_source(api, s, scenario.levels(s), rev) + "\n")
    labels_path = lab.path("labels.json")
    with open(labels_path, "w") as out:
        rc = lab.label(out)
    if rc:
        raise Exit(rc)
    with open(labels_path) as f:
        labels = json.load(f)
    ch = json.dumps(kueue.apply_chain(api, s, labels))
    write(lab.path("chain.json"), ch + "\n")
    write(lab.path("loaded"), path + "\n")
    log(f"loaded {os.path.basename(path)} (revision {rev}): {ch}")
    return labels


def cmd_up(lab, path=BASE_SCENARIO, *_):
    t0 = time.time()
    s = scenario.load(path)
    os.makedirs(lab.path("kueue"), exist_ok=True)
    os.makedirs(lab.path("topogate"), exist_ok=True)
    lab.prepare()
    log(f"binaries ready in {int(time.time() - t0)} s")
    lab.control_plane("start")
    lab.cp_env()
    lab.make_pki()
    lab.install_crds()
    lab.start_kueue()
    log(f"Kueue ready in {int(time.time() - t0)} s (log: {lab.path('kueue', 'kueue.log')})")
    lab.start_nfd()
    log(f"nfd-master {os.environ.get('NFD_VERSION', '')} ready in {int(time.time() - t0)} s "
        f"(log: {lab.path('nfd', 'nfd-master.log')})")
    load(lab, s, path)
    log(f"lab up in {int(time.time() - t0)} s")
    print(f"export KUBECONFIG={os.environ['KUBECONFIG']}")
    return 0


def options(args, usage):
    keep = bool(args) and args[0] == "--keep"
    if keep:
        args = args[1:]
    if not args:
        raise Failed(f"usage: {usage}")
    return keep, args[0]


def ready_for(lab, path):
    s = scenario.load(path)
    lab.prepare()
    lab.require_up()
    lab.cp_env()
    return s


def finish(lab, keep):
    if not keep:
        objects.unload(lab.api)
        if os.path.exists(lab.path("loaded")):
            os.remove(lab.path("loaded"))


def submit(api, s):
    """The scenario's LimitRanges, RuntimeClasses and Workloads, each Workload decided and
    diagnosed in turn; 3 when an expectation is not met."""
    from . import kueue
    kueue.create_extras(api, s)
    return record.run_workloads(api, s, lambda w: api.create("workloads.kueue.x-k8s.io", kueue.workload(api, s, w)))


def cmd_run(lab, *args):
    keep, path = options(list(args), "tas-lab.sh run [--keep] SCENARIO.json")
    s = ready_for(lab, path)
    load(lab, s, path)
    rc = submit(lab.api, s)
    finish(lab, keep)
    return rc


def cmd_change(lab, *args):
    """The runbook's "Change a live hierarchy", rehearsed. Loads the scenario, submits its
    Workloads (as run does), then publishes its `change` (new levels and labels): topogate
    restarts with the new TopologySource (as the chart restarts it on a configuration change)
    and reports the profile impact of its first revision against the Nodes' labels; the
    labeler applies the revision; the Nodes relabelled must be exactly those the impact
    listed; then the queue is migrated as GPUStack does (replacement flavors, HoldAndDrain,
    zero reservations, switch, restore) and Kueue's evictions and readmissions are printed."""
    from . import kueue
    keep, path = options(list(args), "tas-lab.sh change [--keep] SCENARIO.json")
    s = ready_for(lab, path)
    t = scenario.changed(s)
    load(lab, s, path)
    api = lab.api
    rc = submit(api, s)
    before = objects.node_profiles(api)
    write(lab.path("profiles-before.json"), json.dumps(before, sort_keys=True) + "\n")
    objects.write_inventory(t, lab.path("topogate"))
    # What an operator asks before publishing: the prediction, on the cluster as it is.
    predicted = record.predict_change(s, lab.path("topogate", "snapshot.yaml"),
                                      lab.path("topogate", "topologysource.yaml"))
    lab.start_topogate()
    impact = lab.topogate_status()
    with open(lab.path("impact.json"), "wb") as f:
        f.write(impact)
    with open(lab.path("labels-after.json"), "w") as out:
        lrc = lab.label(out)
    if lrc:
        raise Exit(lrc)
    with open(lab.path("labels-after.json")) as f:
        labels = json.load(f)
    line = record.impact_lines(s, json.loads(impact), before, objects.node_profiles(api))
    q0, held0, drained, q1, evicted = kueue.migrate_queue(api, s, t, labels, lambda: record.reserved(api, s))
    line["queue"] = {"before": q0, "drained": {"reservingWorkloads": drained["reservingWorkloads"]},
                     "after": q1, "sameQueue": q0["uid"] == q1["uid"]}
    line["evicted"] = evicted
    print(json.dumps(line), flush=True)
    # A queue whose flavor set did not change is not drained (Nodes moved between profiles).
    line["queue"]["flavorSetChanged"] = changed_set = sorted(q0["flavors"]) != sorted(q1["flavors"])
    if not (line["impactMatchesCluster"] and q0["uid"] == q1["uid"] and
            not (changed_set and drained["reservingWorkloads"])):
        rc = 3
    if not record.after_change(api, s, t, held0, evicted):
        rc = 3
    record.change_agreement(api, s, predicted, evicted)
    finish(lab, keep)
    return rc


def cmd_status(lab, *_):
    up = False
    print(f"state: {lab.dir}")
    if lab.has_control_plane():
        lab.cp_env()
        # kubectl, not the client: a control plane that is gone must be "not ready" at once,
        # not after the client's retries.
        if lab.kubectl("get", "--raw", "/readyz", check=False).returncode == 0:
            print(f"control plane: ready ({os.environ['TOPOGATE_CP_URL']})")
            up = True
        else:
            print("control plane: not ready")
    else:
        print("control plane: not started")
    if alive(lab.path("kueue", "pid")):
        pid = read(lab.path("kueue", "pid"))
        if cluster.answers(f"http://127.0.0.1:{read(lab.path('kueue', 'health.port'))}/readyz"):
            print(f"kueue: ready (pid {pid}, {lab.kueue_version()})")
        else:
            print(f"kueue: running, not ready (pid {pid})")
    else:
        print("kueue: not running")
    if alive(lab.path("nfd", "pid")):
        print(f"nfd-master: running (pid {read(lab.path('nfd', 'pid'))}, port {read(lab.path('nfd', 'port'))}, "
              f"flags: {read(lab.path('nfd', 'flags'), '')})")
    else:
        print("nfd-master: not running")
    if alive(lab.path("topogate", "pid")):
        print(f"topogate: serving {lab.topogate_url('/snapshots/lab')}")
    else:
        print("topogate: not running")
    if os.path.isfile(lab.path("loaded")):
        print(f"loaded: {read(lab.path('loaded'))}")
    if up:
        print("\n".join(objects.status_lines(lab.api)))
        print(f"export KUBECONFIG={os.environ['KUBECONFIG']}")
    return 0 if up and alive(lab.path("kueue", "pid")) else 1


def cmd_down(lab, *_):
    stop_pid(lab.path("topogate", "pid"), "topogate")
    stop_pid(lab.path("nfd", "pid"), "nfd-master")
    stop_pid(lab.path("kueue", "pid"), "kueue")
    if os.path.isdir(lab.cp_dir):
        lab.control_plane("stop")
    # Only a directory this program laid out.
    if any(os.path.isdir(lab.path(d)) for d in ("kueue", "topogate", "cp")) or not os.path.exists(lab.dir):
        shutil.rmtree(lab.dir, ignore_errors=True)
    else:
        log(f"{lab.dir} does not look like a TAS lab state directory: left in place")
    log("down")
    return 0


def cmd_nfd(lab, what=None, *_):
    if what not in ("start", "stop"):
        raise Failed("usage: tas-lab.sh nfd start|stop")
    lab.prepare()
    lab.require_up()
    lab.cp_env()
    if what == "start":
        lab.start_nfd()
    else:
        lab.stop_nfd()
    return 0


def cmd_relabel(lab, *_):
    lab.prepare()
    lab.require_up()
    lab.cp_env()
    sys.stdout.flush()
    return lab.label(sys.stdout)


# The kinds a fixture holds (diagnose --from reads one file a kind): file -> the lab's kind.
DUMP = {"nodes.json": "nodes", "pods.json": "pods", "topologysources.json": "topologysources.worker.gpustack.ai",
        "topologies.json": "topologies.kueue.x-k8s.io", "resourceflavors.json": "resourceflavors.kueue.x-k8s.io",
        "clusterqueues.json": "clusterqueues.kueue.x-k8s.io", "localqueues.json": "localqueues.kueue.x-k8s.io",
        "workloads.json": "workloads.kueue.x-k8s.io", "limitranges.json": "limitranges",
        "runtimeclasses.json": "runtimeclasses.node.k8s.io"}


def cmd_dump(lab, out=None, *_):
    from .kube import KINDS
    if not out:
        raise Failed("usage: tas-lab.sh dump DIR")
    lab.prepare()
    lab.require_up()
    lab.cp_env()
    os.makedirs(out, exist_ok=True)
    for name, kind in DUMP.items():
        items = []
        for o in lab.api.list(kind, scenario.OWNED):
            o.get("metadata", {}).pop("managedFields", None)
            api_version, k = KINDS[kind]
            items.append({"apiVersion": api_version, "kind": k, **o})
        if items:
            with open(os.path.join(out, name), "w") as f:
                json.dump({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}},
                          f, indent=4)
                f.write("\n")
    return 0


def cmd_env(lab, *_):
    if lab.has_control_plane():
        lab.cp_env()
        print(f"export KUBECONFIG={os.environ['KUBECONFIG']}")
    return 0


COMMANDS = {"up": cmd_up, "run": cmd_run, "change": cmd_change, "dump": cmd_dump, "status": cmd_status, "down": cmd_down,
            "nfd": cmd_nfd, "relabel": cmd_relabel, "env": cmd_env}


def main(argv):
    cmd = COMMANDS.get(argv[0]) if argv else None
    if cmd is None:
        sys.stderr.write(__doc__)
        return 2
    lab = Lab()
    try:
        return cmd(lab, *argv[1:])
    except Exit as e:
        return e.code
    except scenario.Invalid as e:
        log(str(e))
        return 2
    except (Failed, TimeoutError, subprocess.CalledProcessError) as e:
        log(str(e))
        return 1
    except Exception as e:  # the API's errors (kube.Error, imported late): one line
        kube = sys.modules.get(f"{__package__}.kube")
        if kube is None or not isinstance(e, kube.Error):
            raise
        log(str(e))
        return 1
