"""The lab's processes, all under its state directory: the control plane
(test/e2e/control-plane.sh), a PKI, the CRDs, Kueue's controller manager, nfd-master,
`topogate serve` and the labeler. Nothing else on the machine is changed."""
import base64
import os
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

import yaml

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(E2E))
NFD_NODE = "tas-lab-nfd-master"
# Webhook configurations the lab registers for Kueue carry this label.
WEBHOOK_LABEL = "tas-lab.topogate.invalid/kueue"


def log(msg):
    print(f"tas-lab: {msg}", file=sys.stderr, flush=True)


class Failed(Exception):
    """A step of the lab that did not happen: what, and where its log is."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shell_env(text):
    """KEY=VALUE lines in shell syntax (with or without `export`) -> {KEY: VALUE}."""
    out = {}
    for line in text.splitlines():
        words = shlex.split(line)
        if words[:1] == ["export"]:
            words = words[1:]
        for w in words:
            key, sep, value = w.partition("=")
            if sep:
                out[key] = value
    return out


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def alive(pidfile):
    """PIDFILE names a process that runs: not gone, and not a zombie (a process whose parent
    exited is reaped by PID 1, which may take a second after it exited)."""
    pid = read(pidfile)
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(") ", 1)[1][:1]
    except (OSError, ValueError, IndexError):
        return False
    return state != "Z"


def stop_pid(pidfile, name):
    """SIGTERM, SIGKILL after 15 s; the pidfile removed."""
    if alive(pidfile):
        pid = int(read(pidfile))
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
        for _ in range(300):
            if not alive(pidfile):
                break
            time.sleep(0.05)
        if alive(pidfile):
            log(f"{name} did not exit after SIGTERM, sending SIGKILL")
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    if os.path.exists(pidfile):
        os.remove(pidfile)


def start(argv, logfile, pidfile, env=None, append=False):
    """A background process of the lab: stdin from /dev/null, output to LOGFILE, its pid in
    PIDFILE. It outlives this program, as a shell's `cmd &` does."""
    with open(logfile, "a" if append else "w") as out:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
    write(pidfile, f"{p.pid}\n")
    return p


def answers(url, cafile=None, timeout=2):
    """URL answers 2xx (no proxy: every piece of the lab is on the loopback)."""
    handlers = [urllib.request.ProxyHandler({})]
    if cafile:
        handlers.append(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=cafile)))
    try:
        with urllib.request.build_opener(*handlers).open(url, timeout=timeout) as r:
            return 200 <= r.status < 300
    except (OSError, ValueError):
        return False


def wait_ready(url, pidfile, logfile, name, seconds, every, cafile=None, tail=30):
    deadline = time.time() + seconds
    while not answers(url, cafile):
        if not alive(pidfile):
            sys.stderr.write("".join(open(logfile, errors="replace").readlines()[-tail:]))
            raise Failed(f"{name} exited during start-up (log: {logfile})")
        if time.time() > deadline:
            sys.stderr.write("".join(open(logfile, errors="replace").readlines()[-tail:]))
            raise Failed(f"{name} not ready after {seconds} s (log: {logfile})")
        time.sleep(every)


class Lab:
    """The lab at TAS_LAB_DIR (default ${TMPDIR:-/tmp}/topogate-tas-lab-$UID)."""

    def __init__(self):
        self.dir = os.environ.get("TAS_LAB_DIR") or \
            os.path.join(os.environ.get("TMPDIR") or "/tmp", f"topogate-tas-lab-{os.getuid()}")
        self.timeout = int(os.environ.get("TAS_LAB_TIMEOUT", "180"))
        self.cp_dir = os.path.join(self.dir, "cp")
        os.environ["TOPOGATE_CP_DIR"] = self.cp_dir
        self._api = None

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    # ------------------------------------------------------------ binaries

    def prepare(self):
        """The binaries and paths, in os.environ. `up` records them in prepared.env, which
        the other commands reuse: checking them runs go list and every cached binary's
        --version, seconds a case otherwise."""
        recorded = self.path("prepared.env")
        labeler = self.path("bin", "labeler")
        if os.path.getsize(recorded) if os.path.exists(recorded) else 0:
            if os.access(labeler, os.X_OK):
                want = os.environ.get("TOPOGATE_BINARY")
                os.environ.update(shell_env(read(recorded, "")))
                if want:
                    os.environ["TOPOGATE_BINARY"] = want
                e = os.environ
                if all(os.access(p, os.X_OK) for p in (
                        e.get("KUBECTL", ""), e.get("TOPOGATE_BINARY", ""),
                        os.path.join(e.get("KUEUE_BIN_DIR", "/nonexistent"), "kueue-manager"),
                        os.path.join(e.get("NFD_BIN_DIR", "/nonexistent"), "nfd-master"))):
                    return
        os.makedirs(self.path("bin"), exist_ok=True)
        for tool in ("build-kube-bins.sh", "build-kueue.sh", "build-nfd.sh"):
            out = subprocess.run([os.path.join(E2E, tool), "--print-env"], stdout=subprocess.PIPE, text=True)
            if out.returncode:
                raise Failed(f"{tool} failed (exit {out.returncode})")
            os.environ.update(shell_env(out.stdout))
        topogate = self.find_topogate()
        if not os.access(topogate, os.X_OK):
            raise Failed(f"no topogate binary at {topogate}")
        if not os.access(labeler, os.X_OK) or self.newer_go(labeler):
            env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly")
            subprocess.run(["nice", "-n", "10", "go", "build", "-o", labeler, "./labeler"],
                           cwd=os.path.join(REPO, "conformance"), env=env, check=True)
        e = os.environ
        e.update(KUBECTL=os.path.join(e["KUBE_BIN_DIR"], "kubectl"), TOPOGATE_BINARY=topogate, TAS_LAB_DIR=self.dir)
        keys = ("KUBE_BIN_DIR", "KUEUE_BIN_DIR", "KUEUE_VERSION", "KUEUE_CRD_DIR", "NFD_BIN_DIR", "NFD_VERSION",
                "NFD_CRD_DIR", "KUBECTL", "TOPOGATE_BINARY")
        write(recorded, "".join(f"export {k}={shlex.quote(e[k])}\n" for k in keys if k in e))

    @staticmethod
    def newer_go(than):
        t = os.path.getmtime(than)
        for root, _, files in os.walk(os.path.join(REPO, "conformance")):
            if any(f.endswith(".go") and os.path.getmtime(os.path.join(root, f)) > t for f in files):
                return True
        return False

    @staticmethod
    def find_topogate():
        if os.environ.get("TOPOGATE_BINARY"):
            return os.environ["TOPOGATE_BINARY"]
        for preset in ("dev", "release", "debug"):
            p = os.path.join(REPO, "build", preset, "cli", "topogate")
            if os.access(p, os.X_OK):
                return p
        log("no topogate binary: building the dev preset")
        subprocess.run(["cmake", "--preset", "dev"], cwd=REPO, stdout=sys.stderr, check=True)
        subprocess.run(["nice", "-n", "10", "cmake", "--build", "--preset", "dev", "--target", "topogate"],
                       cwd=REPO, stdout=sys.stderr, check=True)
        return os.path.join(REPO, "build", "dev", "cli", "topogate")

    # ------------------------------------------------------------ control plane

    def control_plane(self, verb):
        subprocess.run([os.path.join(E2E, "control-plane.sh"), verb], stdout=sys.stderr, check=verb != "stop")

    def has_control_plane(self):
        return os.path.isfile(os.path.join(self.cp_dir, "env"))

    def cp_env(self):
        """The control plane's environment (KUBECONFIG, TOPOGATE_CP_URL, ...), in os.environ."""
        os.environ.update(shell_env(read(os.path.join(self.cp_dir, "env"), "")))

    @property
    def api(self):
        if self._api is None:
            from . import kube  # the Kubernetes client's import is the slow part of a start
            self._api = kube.Api(os.environ["KUBECONFIG"], self.dir)
        return self._api

    def kubectl(self, *args, stdin=None, check=True):
        r = subprocess.run([os.environ["KUBECTL"], *args], input=stdin, text=True, capture_output=True)
        if check and r.returncode:
            raise Failed(f"kubectl {' '.join(args[:3])}: {r.stderr.strip()}")
        return r

    def is_up(self):
        return self.has_control_plane() and alive(self.path("kueue", "pid"))

    def require_up(self):
        if not self.is_up():
            raise Failed("the lab is not up (scripts/tas-lab.sh up)")

    def make_pki(self):
        pki = self.path("pki")
        os.makedirs(pki, exist_ok=True)
        env = dict(os.environ, CERTS_QUIET="1")
        certs = os.path.join(REPO, "certs")
        subprocess.run([f"{certs}/make-ca.sh", "--out", pki, "--cn", "topogate TAS lab CA"],
                       env=env, stdout=subprocess.DEVNULL, check=True)
        for name in ("kueue-webhook", "kueue-metrics", "topogate"):
            subprocess.run([f"{certs}/make-server-cert.sh", "--ca-cert", f"{pki}/ca.crt", "--ca-key", f"{pki}/ca.key",
                            "--out", pki, "--name", name, "--ip", "127.0.0.1", "--dns", "localhost", "--days", "30"],
                           env=env, stdout=subprocess.DEVNULL, check=True)
        token = os.path.join(pki, "reader.token")
        if not read(token):
            fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(base64.b64encode(os.urandom(32)).decode().translate(str.maketrans("", "", "/+=\n")))
        for which in ("webhook", "metrics"):
            d = self.path("kueue", f"{which}-certs")
            os.makedirs(d, exist_ok=True)
            for ext in ("crt", "key"):
                with open(f"{pki}/kueue-{which}.{ext}", "rb") as src, open(f"{d}/tls.{ext}", "wb") as dst:
                    dst.write(src.read())

    def install_crds(self):
        crds = os.environ["KUEUE_CRD_DIR"]
        for f in sorted(os.listdir(crds)):
            if f.endswith(".yaml"):
                self.kubectl("apply", "--server-side", "-f", os.path.join(crds, f))
        self.kubectl("apply", "--server-side", "-f", os.path.join(E2E, "crds") + "/")
        self.kubectl("apply", "--server-side", "-f", os.path.join(os.environ["NFD_CRD_DIR"], "nfd-api-crds.yaml"))
        # kubectl wait fails outright on a CRD whose status is not written yet ("accessor
        # error"): retried until every CRD is Established.
        for _ in range(60):
            if not self.kubectl("wait", "--for", "condition=Established", "--timeout", "60s", "crd", "--all",
                                check=False).returncode:
                break
            time.sleep(1)
        else:
            raise Failed("the CRDs were not Established after 60 s")
        for ns in ("kueue-system", "gpustack-system", "node-feature-discovery"):
            if self.api.get("namespaces", ns) is None:
                self.api.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    # ------------------------------------------------------------ Kueue

    def register_webhooks(self, port):
        """Kueue's own webhook manifests (config/components/webhook) for its kueue.x-k8s.io
        kinds, pointed by URL at the local manager; the job-framework webhooks (Pods, Jobs,
        ...) are left out with their integrations."""
        src = os.path.join(os.environ["KUEUE_CRD_DIR"], "..", "..", "webhook", "manifests.yaml")
        with open(self.path("pki", "ca.crt"), "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        with open(src) as f:
            docs = list(yaml.safe_load_all(f))
        for doc in docs:
            hooks = []
            for w in doc["webhooks"]:
                if not any("kueue.x-k8s.io" in r.get("apiGroups", []) for r in w["rules"]):
                    continue
                w["clientConfig"] = {"url": f"https://127.0.0.1:{port}{w['clientConfig']['service']['path']}",
                                     "caBundle": ca}
                w["timeoutSeconds"] = 10
                hooks.append(w)
            doc["metadata"] = {"name": "kueue-" + doc["metadata"]["name"], "labels": {WEBHOOK_LABEL: "webhook"}}
            doc["webhooks"] = hooks
            self.api.apply(doc)

    def start_kueue(self):
        d = self.path("kueue")
        if alive(f"{d}/pid"):
            return
        wport, hport, mport, vport = (free_port() for _ in range(4))
        write(f"{d}/config.yaml", f"""apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:{hport}
metrics:
  bindAddress: 127.0.0.1:{mport}
webhook:
  host: 127.0.0.1
  port: {wport}
  certDir: {d}/webhook-certs
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
clientConnection:
  qps: 100
  burst: 200
integrations:
  frameworks: ["batch/job"]
""")
        write(f"{d}/health.port", f"{hport}\n")
        write(f"{d}/metrics.port", f"{mport}\n")
        write(f"{d}/webhook.port", f"{wport}\n")
        self.register_webhooks(wport)
        # With internal certificate management off, Kueue reads its metrics certificate from
        # the fixed path /etc/kueue/metrics/certs. The manager runs in a private mount
        # namespace whose /etc is an overlay, so that path is the lab's without writing to
        # the machine's /etc.
        os.makedirs(f"{d}/etc-upper", exist_ok=True)
        os.makedirs(f"{d}/etc-work", exist_ok=True)
        if subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                          stderr=subprocess.DEVNULL).returncode:
            raise Failed("unshare --mount is not permitted here (the lab needs root or CAP_SYS_ADMIN for "
                         "Kueue's fixed metrics certificate path)")
        script = ('mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/etc-upper,workdir=$1/etc-work" /etc && '
                  'mkdir -p /etc/kueue/metrics && rm -rf /etc/kueue/metrics/certs && '
                  'cp -r "$1/metrics-certs" /etc/kueue/metrics/certs && '
                  'exec "$2" --config "$1/config.yaml" --kubeconfig "$3" --visibility-server-port "$4" '
                  '--feature-gates VisibilityOnDemand=false --zap-log-level 2')
        start(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", d,
               os.path.join(os.environ["KUEUE_BIN_DIR"], "kueue-manager"), os.environ["KUBECONFIG"], str(vport)],
              f"{d}/kueue.log", f"{d}/pid")
        wait_ready(f"http://127.0.0.1:{hport}/readyz", f"{d}/pid", f"{d}/kueue.log", "Kueue", self.timeout, 0.3)

    # ------------------------------------------------------------ nfd-master

    def start_nfd(self):
        """nfd-master (test/e2e/nfd.sh shows it against a local apiserver). It patches its own
        Node once at start (NODE_NAME must exist then): a Node of its own, without capacity
        or profile, that lives only until nfd-master answers /healthz (its informers synced)."""
        d = self.path("nfd")
        if alive(f"{d}/pid"):
            return
        os.makedirs(d, exist_ok=True)
        port = free_port()
        write(f"{d}/port", f"{port}\n")
        write(f"{d}/nfd-master.conf", "{}\n")
        try:
            self.api.create("nodes", {"apiVersion": "v1", "kind": "Node",
                                      "metadata": {"name": NFD_NODE, "labels": {"kubernetes.io/hostname": NFD_NODE},
                                                   "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
                                      "spec": {"unschedulable": True}})
        except Exception:  # noqa: BLE001 (already there from a start before)
            pass
        flags = os.environ.get("TAS_LAB_NFD_FLAGS", "")
        env = {k: v for k, v in os.environ.items() if k not in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}
        env.update(NODE_NAME=NFD_NODE, KUBERNETES_NAMESPACE="node-feature-discovery")
        start([os.path.join(os.environ["NFD_BIN_DIR"], "nfd-master"), "-kubeconfig", os.environ["KUBECONFIG"],
               "-port", str(port), "-config", f"{d}/nfd-master.conf", "-v=2", *flags.split()],
              f"{d}/nfd-master.log", f"{d}/pid", env=env, append=True)
        write(f"{d}/flags", flags + "\n")
        wait_ready(f"http://127.0.0.1:{port}/healthz", f"{d}/pid", f"{d}/nfd-master.log", "nfd-master", 60, 0.05,
                   tail=20)
        self.api.delete("nodes", NFD_NODE)

    def stop_nfd(self):
        stop_pid(self.path("nfd", "pid"), "nfd-master")

    # ------------------------------------------------------------ topogate and the labeler

    def start_topogate(self):
        """`topogate serve` for the inventory in the state directory's topogate/ (restarted:
        the TopologySource, hence the levels, is read at start)."""
        d = self.path("topogate")
        stop_pid(f"{d}/pid", "topogate")
        port = free_port()
        e = os.environ
        write(f"{d}/topogate.yaml", f"""listen:
  address: 127.0.0.1
  port: {port}
tls:
  certFile: {self.dir}/pki/topogate.crt
  keyFile: {self.dir}/pki/topogate.key
logging:
  level: warn
  accessLog: false
# The Node list from the lab's API: the first revision's profile impact is measured against
# the profiles the Nodes carry (what a restart with new levels reports in production).
store:
  type: none
  apiServer: {e["TOPOGATE_CP_URL"]}
  tokenFile: {e["TOPOGATE_CP_ADMIN_TOKEN_FILE"]}
  caFile: {e["TOPOGATE_CP_CA"]}
inventories:
  - name: lab
    source: topologysource.yaml
    snapshot: snapshot.yaml
    nodesFromAPI: true
    driftGracePeriod: {e.get("TAS_LAB_DRIFT_GRACE") or "5m"}
    readers:
      bearerTokenFiles: [{self.dir}/pki/reader.token]
""")
        write(f"{d}/port", f"{port}\n")
        start([e["TOPOGATE_BINARY"], "serve", "--config", f"{d}/topogate.yaml"], f"{d}/topogate.log", f"{d}/pid")
        wait_ready(f"https://127.0.0.1:{port}/readyz", f"{d}/pid", f"{d}/topogate.log", "topogate", 30, 0.1,
                   cafile=self.path("pki", "ca.crt"), tail=20)

    def topogate_url(self, path):
        return f"https://127.0.0.1:{read(self.path('topogate', 'port'))}{path}"

    def topogate_status(self):
        """GET /snapshots/lab/status as the reader: the last attempt with its profile impact."""
        req = urllib.request.Request(self.topogate_url("/snapshots/lab/status"),
                                     headers={"Authorization": f"Bearer {read(self.path('pki', 'reader.token'))}"})
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),
            urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=self.path("pki", "ca.crt"))))
        try:
            with opener.open(req, timeout=30) as r:
                return r.read()
        except OSError as e:
            raise Failed(f"cannot read topogate's status: {e}") from None

    def label(self, out):
        """The consumer's side: the labeler reads topogate's revision over HTTPS, writes the
        NodeFeatures, waits for nfd-master, writes the profiles; its JSON report to OUT (a
        file), its progress to stderr. Returns its exit status."""
        if not alive(self.path("nfd", "pid")):
            log("nfd-master is not running: the NodeFeatures will not be applied")
        e = os.environ
        argv = [self.path("bin", "labeler"), "--nfd-wait", f"{e.get('TAS_LAB_NFD_WAIT') or 60}s",
                "--source", read(self.path("topogate", "source")), "--url", self.topogate_url("/snapshots/lab"),
                "--ca", self.path("pki", "ca.crt"), "--token-file", self.path("pki", "reader.token"),
                "--levels", read(self.path("topogate", "levels")), "--api", e["TOPOGATE_CP_URL"],
                "--api-ca", e["TOPOGATE_CP_CA"], "--api-token-file", e["TOPOGATE_CP_ADMIN_TOKEN_FILE"]]
        sys.stderr.flush()
        return subprocess.run(argv, stdout=out).returncode

    def kueue_version(self):
        for line in open(self.path("kueue", "kueue.log"), errors="replace"):
            i = line.find('"gitVersion":"')
            if i >= 0:
                return line[i:line.index('"', i + 14) + 1]
        return ""
