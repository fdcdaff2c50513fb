"""metrics.auth against the real binary, real TLS and real clients.

- tokenfile: /metrics on the HTTPS port and (with metrics.healthPort: true) the plain health
  port answers 200 to a listed bearer token, 401 with the Bearer challenge to no token, another
  scheme or an unlisted token; /healthz, /livez and /readyz stay open; the token file is
  re-read when it changes (an emptied file keeps the previous tokens); with auth and no
  healthPort key the plain port does not serve /metrics at all.
- kubernetes, against a hanging API server (hanging_api.py): a scrape whose TokenReview hangs
  is answered 503 within metrics.reviewTimeout (+ a margin), every review slot busy answers
  503 at once, and meanwhile snapshot GETs, admission reviews and health checks stay fast;
  SIGTERM answers a review in progress at once. An API nobody listens on: 503 at once.
- kubernetes, against a scripted API (ScriptedApi below: a TLS server answering TokenReview and
  SubjectAccessReview from a table, as the apiserver would): 200 / 403 / 401, the
  SubjectAccessReview asked (non-resource URL /metrics, verb get, the reviewed user, uid,
  groups and extra), topogate's own API token sent, answers cached for metrics.cacheTTL
  (allowed and refused), an API refusing topogate's review (403) answered 503 with the fix,
  the counters, and no token in any log line.

The real apiserver is the e2e suite's (test/e2e/metrics-auth.sh)."""

import http.client
import http.server
import json
import os
import signal
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, FREE_PORT, default_config, wait_for
from hanging_api import HangingApiServer
from hostile_support import client_context

REVIEW = (FIXTURES / "admission" / "allowed.json").read_bytes()
METRICS_TOKEN = "metrics-scraper-token-0123456789abcdef"
OTHER_TOKEN = "metrics-scraper-token-rotated-fedcba9876"
STORE_TOKEN = "topogate-own-api-token-4f1e2d3c"
ALLOWED_TOKEN = "sa-token-prometheus-allowed-1a2b3c"
FORBIDDEN_TOKEN = "sa-token-intruder-forbidden-4d5e6f"
UNKNOWN_TOKEN = "sa-token-garbage-7a8b9c"
SECRETS = (METRICS_TOKEN, OTHER_TOKEN, STORE_TOKEN, ALLOWED_TOKEN, FORBIDDEN_TOKEN, UNKNOWN_TOKEN)

REVIEW_TIMEOUT_S = 3.0
MARGIN_S = 1.0      # a hanging review is answered within REVIEW_TIMEOUT_S + MARGIN_S
FAST_S = 1.0        # everything else, and a refusal "at once" (sanitizer builds included)


# ---------------------------------------------------------------- clients

def request(port, pki, path, token=None, method="GET", body=None, headers=None, plain=False, timeout=20):
    """(status, headers, body text, seconds) of one request on a new connection."""
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = token if " " in token else f"Bearer {token}"
    if plain:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=client_context(pki), timeout=timeout)
    t0 = time.monotonic()
    try:
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        return r.status, {k.lower(): v for k, v in r.getheaders()}, text, time.monotonic() - t0
    finally:
        conn.close()


def sample(text, name, **labels):
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        if series.split("{")[0] != name:
            continue
        if all(f'{k}="{v}"' in series for k, v in labels.items()):
            return float(value)
    return None


def assert_no_secret_logged(server):
    log = server.log_path.read_text(errors="replace")
    for secret in SECRETS:
        assert secret not in log, "a token reached the log"


# ---------------------------------------------------------------- tokenfile

def tokenfile_config(pki, d: Path, health_port=None):
    (d / "metrics.tokens").write_text(METRICS_TOKEN + "\n")
    hp = "" if health_port is None else f", healthPort: {str(health_port).lower()}"
    return default_config(pki, d, extra=f"metrics: {{auth: tokenfile, tokenFile: metrics.tokens{hp}}}")


def replace_file(path: Path, text: str):
    """As a Secret volume update does: a new file renamed over the old one."""
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_tokenfile_on_both_listeners(make_server, pki):
    s = make_server(lambda d: tokenfile_config(pki, d, health_port=True), extra_args=["--health-port", FREE_PORT])
    for port, plain in ((s.port, False), (s.health_port, True)):
        where = "plain" if plain else "https"
        status, headers, body, _ = request(port, pki, "/metrics", plain=plain)
        assert status == 401, (where, body)
        assert headers.get("www-authenticate") == 'Bearer realm="topogate"'
        assert "topogate_" not in body
        assert request(port, pki, "/metrics", token="Basic bWV0cmljczp4", plain=plain)[0] == 401, where
        assert request(port, pki, "/metrics", token="wrong-" + METRICS_TOKEN, plain=plain)[0] == 401, where
        status, headers, body, _ = request(port, pki, "/metrics", token=METRICS_TOKEN, plain=plain)
        assert status == 200, (where, body)
        assert headers["content-type"].startswith("text/plain; version=0.0.4")
        assert "topogate_http_requests_total" in body
        head = request(port, pki, "/metrics", token=METRICS_TOKEN, method="HEAD", plain=plain)
        assert head[0] == 200 and head[2] == ""
        for probe in ("/healthz", "/livez", "/readyz"):
            assert request(port, pki, probe, plain=plain)[0] == 200, (where, probe)
    text = request(s.port, pki, "/metrics", token=METRICS_TOKEN)[2]
    assert sample(text, "topogate_metrics_auth_total", result="unauthenticated") == 6
    assert sample(text, "topogate_metrics_auth_total", result="allowed") >= 4
    assert sample(text, "topogate_metrics_auth_total", result="forbidden") == 0
    assert_no_secret_logged(s)


def test_tokenfile_is_reread_when_it_changes(make_server, pki):
    s = make_server(lambda d: tokenfile_config(pki, d))
    token_file = s.dir / "metrics.tokens"
    assert request(s.port, pki, "/metrics", token=METRICS_TOKEN)[0] == 200
    replace_file(token_file, OTHER_TOKEN + "\n")
    wait_for(lambda: request(s.port, pki, "/metrics", token=OTHER_TOKEN)[0] == 200, timeout=10, what="the new token")
    assert request(s.port, pki, "/metrics", token=METRICS_TOKEN)[0] == 401
    # An emptied file is refused; the tokens read before stay valid.
    replace_file(token_file, "\n")
    wait_for(lambda: any(e.get("msg") == "metrics token file reload failed; keeping the previous tokens"
                         for e in s.logs()), timeout=10, what="the failed reload")
    status, _, body, _ = request(s.port, pki, "/metrics", token=OTHER_TOKEN)
    assert status == 200
    assert sample(body, "topogate_credential_reloads_total", kind="metrics-token", result="success") == 1
    assert sample(body, "topogate_credential_reloads_total", kind="metrics-token", result="failure") == 1
    assert_no_secret_logged(s)


def test_with_auth_the_plain_port_serves_no_metrics_unless_asked(make_server, pki):
    s = make_server(lambda d: tokenfile_config(pki, d), extra_args=["--health-port", FREE_PORT])
    status, _, body, _ = request(s.health_port, pki, "/metrics", token=METRICS_TOKEN, plain=True)
    assert status == 404
    assert "HTTPS port only" in body
    assert request(s.health_port, pki, "/readyz", plain=True)[0] == 200
    assert request(s.port, pki, "/metrics", token=METRICS_TOKEN)[0] == 200


def test_without_metrics_auth_both_ports_stay_open(make_server, pki):
    s = make_server(lambda d: default_config(pki, d), extra_args=["--health-port", FREE_PORT])
    assert request(s.port, pki, "/metrics")[0] == 200
    assert request(s.health_port, pki, "/metrics", plain=True)[0] == 200
    assert "topogate_metrics_auth_total" not in request(s.port, pki, "/metrics")[2]


@pytest.mark.parametrize("metrics, expect", [
    ("{auth: kubernetes}", "metrics.auth kubernetes: cannot reach the Kubernetes API"),
    ("{auth: tokenfile, tokenFile: empty.tokens}", "holds no token"),
    ("{auth: tokenfile, tokenFile: absent.tokens}", "absent.tokens"),
    ("{auth: tokenfile}", "metrics.tokenFile: is required with metrics.auth tokenfile"),
    ("{auth: kubernetes, reviewTimeout: 31s}", "metrics.reviewTimeout: must be between 100ms and 30s"),
])
def test_unusable_configuration_stops_the_start(binary, pki, tmp_path, metrics, expect):
    (tmp_path / "empty.tokens").write_text("\n")
    (tmp_path / "topogate.yaml").write_text(default_config(pki, tmp_path, extra=f"metrics: {metrics}"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE")}
    p = subprocess.run([binary, "serve", "--config", str(tmp_path / "topogate.yaml"), "--port", "0"],
                       capture_output=True, text=True, timeout=30, env=env)
    assert p.returncode == 2, p.stderr
    assert expect in p.stderr


# ---------------------------------------------------------------- kubernetes: the hanging API

def kube_config(pki, d: Path, api_url, extra_metrics="", timeout=f"{REVIEW_TIMEOUT_S:g}s"):
    (d / "store.token").write_text(STORE_TOKEN + "\n")
    return default_config(pki, d, extra=f"""threads: 2
store: {{apiServer: '{api_url}', tokenFile: store.token, caFile: {pki.ca}}}
metrics: {{auth: kubernetes, reviewTimeout: {timeout}{extra_metrics}}}""")


@pytest.fixture
def hanging_api(pki):
    api = HangingApiServer(pki.server_crt, pki.server_key)
    yield api
    api.stop()


def test_a_hanging_review_fails_only_the_scrape(make_server, pki, hanging_api):
    s = make_server(lambda d: kube_config(pki, d, hanging_api.url, ", maxConcurrentReviews: 2"))
    results = {}

    def scrape(name, token):
        results[name] = request(s.port, pki, "/metrics", token=token)

    scrapes = [threading.Thread(target=scrape, args=(f"scrape-{i}", f"{ALLOWED_TOKEN}-{i}")) for i in range(2)]
    t0 = time.monotonic()
    for t in scrapes:
        t.start()
    wait_for(lambda: len([r for r in hanging_api.requests if "tokenreviews" in r]) >= 2, timeout=REVIEW_TIMEOUT_S,
             what="both TokenReviews at the API")
    # Both review slots are taken: a third token is refused at once, not queued.
    status, headers, body, seconds = request(s.port, pki, "/metrics", token=f"{ALLOWED_TOKEN}-2")
    assert status == 503 and seconds < FAST_S, (status, seconds, body)
    assert "maxConcurrentReviews: 2" in body and headers.get("retry-after") == "5"
    # Meanwhile everything else answers as usual.
    for what, call in (
        ("snapshot GET", lambda: request(s.port, pki, "/snapshots/demo", token=pki.token)),
        ("admission review", lambda: request(s.port, pki, "/validate/topologysources?timeout=10s", method="POST",
                                             body=REVIEW, headers={"Content-Type": "application/json"})),
        ("healthz", lambda: request(s.port, pki, "/healthz")),
        ("readyz", lambda: request(s.port, pki, "/readyz")),
    ):
        status, _, body, seconds = call()
        assert status == 200 and seconds < FAST_S, (what, status, seconds, body)
    assert time.monotonic() - t0 < REVIEW_TIMEOUT_S, "the probes ran after the reviews timed out: nothing was shown"
    for t in scrapes:
        t.join(timeout=REVIEW_TIMEOUT_S + MARGIN_S + 5)
    for name in ("scrape-0", "scrape-1"):
        status, headers, body, seconds = results[name]
        assert status == 503, (name, body)
        assert REVIEW_TIMEOUT_S * 0.9 <= seconds <= REVIEW_TIMEOUT_S + MARGIN_S, (name, seconds)
        assert f"within {REVIEW_TIMEOUT_S:g}s" in body or "timeout" in body.lower(), body
        assert headers.get("retry-after") == "5"
    assert all(r == "POST /apis/authentication.k8s.io/v1/tokenreviews" for r in hanging_api.requests), \
        hanging_api.requests
    # The slots are free again once the reviews gave up: the next scrape is reviewed (and hangs
    # again) instead of being refused at once.
    def reviewed_again():
        status, _, _, seconds = request(s.port, pki, "/metrics", token=f"{ALLOWED_TOKEN}-3")
        return status == 503 and seconds >= REVIEW_TIMEOUT_S * 0.9
    wait_for(reviewed_again, timeout=3 * REVIEW_TIMEOUT_S, interval=0.1, what="a free review slot")
    assert_no_secret_logged(s)


# ---------------------------------------------------------------- kubernetes: a scripted API

class ScriptedApi:
    """A TLS server answering TokenReview and SubjectAccessReview as the apiserver does: a token
    of `users` is authenticated as that user, a user in `allowed` may get /metrics. Records each
    request (path, body, Authorization header); `tokenreview_status` makes TokenReviews fail."""

    def __init__(self, pki):
        self.users = {}
        self.allowed = set()
        self.tokenreview_status = 201
        self.requests = []
        self.lock = threading.Lock()
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with api.lock:
                    api.requests.append((self.path, body, self.headers.get("Authorization")))
                if self.path == "/apis/authentication.k8s.io/v1/tokenreviews":
                    status, out = api.token_review(body)
                elif self.path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
                    status, out = 201, api.access_review(body)
                else:
                    status, out = 404, {"kind": "Status", "code": 404}
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(pki.server_crt), str(pki.server_key))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"https://127.0.0.1:{self.httpd.server_address[1]}"

    def token_review(self, body):
        if self.tokenreview_status != 201:
            return self.tokenreview_status, {"kind": "Status", "code": self.tokenreview_status}
        token = body["spec"]["token"]
        # Like the apiserver, the answer echoes the spec (and so the token).
        out = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": body["spec"]}
        user = self.users.get(token)
        out["status"] = {"authenticated": True, "user": user} if user else \
            {"authenticated": False, "error": "invalid bearer token"}
        return 201, out

    def access_review(self, body):
        name = body["spec"]["user"]
        ok = name in self.allowed
        status = {"allowed": ok}
        if not ok:
            status["reason"] = "no RBAC policy matched"
        return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "status": status}

    def count(self, kind):
        with self.lock:
            return len([r for r in self.requests if r[0].endswith(kind)])

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


PROMETHEUS = {"username": "system:serviceaccount:monitoring:prometheus", "uid": "0f6c-uid",
              "groups": ["system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"],
              "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]}}
INTRUDER = {"username": "system:serviceaccount:default:intruder", "uid": "9a1b-uid",
            "groups": ["system:serviceaccounts", "system:authenticated"]}


@pytest.fixture
def scripted_api(pki):
    api = ScriptedApi(pki)
    api.users = {ALLOWED_TOKEN: PROMETHEUS, FORBIDDEN_TOKEN: INTRUDER}
    api.allowed = {PROMETHEUS["username"]}
    yield api
    api.stop()


def test_reviews_decide_and_are_cached(make_server, pki, scripted_api):
    s = make_server(lambda d: kube_config(pki, d, scripted_api.url, ", cacheTTL: 3s"),
                    extra_args=["--health-port", FREE_PORT])
    api = scripted_api

    status, headers, body, _ = request(s.port, pki, "/metrics")
    assert status == 401 and headers.get("www-authenticate") == 'Bearer realm="topogate"'
    assert api.requests == [], "no token, no review"

    status, _, body, _ = request(s.port, pki, "/metrics", token=ALLOWED_TOKEN)
    assert status == 200 and "topogate_http_requests_total" in body, body
    (tr_path, tr, tr_auth), (sar_path, sar, sar_auth) = api.requests
    assert tr == {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": ALLOWED_TOKEN}}
    assert sar["spec"] == {"nonResourceAttributes": {"path": "/metrics", "verb": "get"},
                           "user": PROMETHEUS["username"], "uid": PROMETHEUS["uid"], "groups": PROMETHEUS["groups"],
                           "extra": PROMETHEUS["extra"]}
    assert sar["kind"] == "SubjectAccessReview" and sar["apiVersion"] == "authorization.k8s.io/v1"
    assert tr_auth == sar_auth == f"Bearer {STORE_TOKEN}", "topogate authenticates with its own token"

    status, _, body, _ = request(s.port, pki, "/metrics", token=FORBIDDEN_TOKEN)
    assert status == 403, body
    assert INTRUDER["username"] in body and "no RBAC policy matched" in body
    status, headers, body, _ = request(s.port, pki, "/metrics", token=UNKNOWN_TOKEN)
    assert status == 401 and headers.get("www-authenticate"), body
    assert api.count("tokenreviews") == 3 and api.count("subjectaccessreviews") == 2

    # Within cacheTTL every answer, refusals included, comes from the cache.
    t0 = time.monotonic()
    codes = [request(s.port, pki, "/metrics", token=t)[0] for t in (ALLOWED_TOKEN, FORBIDDEN_TOKEN, UNKNOWN_TOKEN)]
    assert codes == [200, 403, 401]
    assert time.monotonic() - t0 < 3.0
    assert api.count("tokenreviews") == 3, "answered from the cache"
    # The plain port is off for metrics by default with auth.
    assert request(s.health_port, pki, "/metrics", token=ALLOWED_TOKEN, plain=True)[0] == 404

    # Past cacheTTL the API is asked again.
    wait_for(lambda: request(s.port, pki, "/metrics", token=ALLOWED_TOKEN)[0] == 200 and
             api.count("tokenreviews") == 4, timeout=10, interval=0.5, what="a review after cacheTTL")

    text = request(s.port, pki, "/metrics", token=ALLOWED_TOKEN)[2]
    assert sample(text, "topogate_metrics_auth_reviews_total", result="allowed") == 2
    assert sample(text, "topogate_metrics_auth_reviews_total", result="forbidden") == 1
    assert sample(text, "topogate_metrics_auth_reviews_total", result="unauthenticated") == 1
    assert sample(text, "topogate_metrics_auth_total", result="forbidden") == 2
    assert sample(text, "topogate_metrics_auth_total", result="unauthenticated") == 3
    assert sample(text, "topogate_metrics_auth_total", result="allowed") >= 4
    assert_no_secret_logged(s)


def test_an_api_refusing_the_review_is_a_503_with_the_fix(make_server, pki, scripted_api):
    scripted_api.tokenreview_status = 403
    s = make_server(lambda d: kube_config(pki, d, scripted_api.url))
    status, headers, body, seconds = request(s.port, pki, "/metrics", token=ALLOWED_TOKEN)
    assert status == 503 and seconds < FAST_S, body
    assert "TokenReview: HTTP 403 (topogate's ServiceAccount needs create on tokenreviews)" in body
    assert headers.get("retry-after") == "5"
    # Not cached: once the API grants it, the next scrape is allowed.
    scripted_api.tokenreview_status = 201
    assert request(s.port, pki, "/metrics", token=ALLOWED_TOKEN)[0] == 200
    warnings = [e for e in s.logs() if e.get("msg") == "metrics scrape not reviewed"]
    assert warnings and "create on tokenreviews" in warnings[0]["reason"]
    assert_no_secret_logged(s)


def test_a_dead_api_is_a_503_at_once(make_server, pki, closed_port):
    s = make_server(lambda d: kube_config(pki, d, f"https://127.0.0.1:{closed_port}"))
    status, headers, body, seconds = request(s.port, pki, "/metrics", token=ALLOWED_TOKEN)
    assert status == 503 and seconds < FAST_S, (status, seconds, body)
    assert "TokenReview: connect 127.0.0.1:" in body and headers.get("retry-after") == "5"
    assert request(s.port, pki, "/healthz")[0] == 200
    assert_no_secret_logged(s)


def test_shutdown_answers_a_review_in_progress(make_server, pki, hanging_api):
    s = make_server(lambda d: kube_config(pki, d, hanging_api.url, timeout="20s"))
    result = {}
    t = threading.Thread(target=lambda: result.update(r=request(s.port, pki, "/metrics", token=ALLOWED_TOKEN)))
    t.start()
    wait_for(lambda: hanging_api.requests, timeout=5, what="the TokenReview at the API")
    t0 = time.monotonic()
    s.signal(signal.SIGTERM)
    t.join(timeout=15)
    assert s.proc.wait(timeout=15) == 0
    assert time.monotonic() - t0 < 5, "shutdown waited for the review"
    assert result["r"][0] == 503 and "shutting down" in result["r"][2]
