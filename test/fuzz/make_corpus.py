#!/usr/bin/env python3
"""Builds the seed corpora for the libFuzzer targets from conformance/cases/.

usage: make_corpus.py SOURCE_DIR OUT_DIR

One directory per target under OUT_DIR. Seeds are the conformance inputs as they are
(YAML and JSON), their JSON renderings (for the JSON/YAML differential target), the
TopologySource and ModelDeployment inputs wrapped in AdmissionReviews, and raw HTTP
requests for every route.
"""
import hashlib
import json
import pathlib
import ssl
import sys
import threading

import yaml


# The largest conformance input meant to be expanded ("rendered-over-1mib": 12 000 aliases of
# one three-label map) has about 60 000 nodes.
MAX_EXPANDED_NODES = 1_000_000
# libyaml's composer recurses once per nesting level on the C stack; main() runs on a
# thread whose stack holds the deepest nesting an input this size can have.
MAX_LOADED_BYTES = 256 * 1024
STACK_BYTES = 1 << 30


def expanded_nodes(root) -> int:
    """Nodes in the tree the composed YAML graph `root` expands to (aliases copied)."""
    sizes = {}
    # Iterative post-order walk: YAML nesting can be deeper than Python's recursion limit.
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes and sizes[key] is not None:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        children = ([v for pair in node.value for v in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value))
        if children_done:
            sizes[key] = min(1 + sum(sizes[id(c)] for c in children), MAX_EXPANDED_NODES + 1)
            continue
        if key in sizes:  # reached again while its children are pending: a recursive alias
            return MAX_EXPANDED_NODES + 1
        sizes[key] = None
        stack.append((node, True))
        stack.extend((c, False) for c in children if sizes.get(id(c)) is None)
    return sizes[id(root)]


# libyaml's parser when PyYAML has it: the pure-Python one takes minutes on the 1 MiB inputs.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_bounded(data: bytes):
    """(True, object) for a YAML/JSON document whose expanded tree is small enough to
    render and walk; (False, None) otherwise (undecodable, or an alias bomb).

    PyYAML shares an aliased node instead of copying it, but json.dumps and the walks
    below expand every alias: the "billion laughs" case (9 levels of 9 aliases, 9^9 nodes)
    once took this script to 19 GB. So the document is composed, its expanded size is
    counted on the graph (each shared node sized once), and only then constructed.
    """
    if len(data) > MAX_LOADED_BYTES:
        return False, None
    loader = LOADER(data)
    try:
        root = loader.get_single_node()
        if root is None:
            return True, None
        if expanded_nodes(root) > MAX_EXPANDED_NODES:
            return False, None
        return True, loader.construct_document(root)
    except Exception:  # the corpus also has deliberately undecodable inputs
        return False, None
    finally:
        loader.dispose()


def client_hellos():
    """A real client's first flight (TLS 1.3 and a 1.2-only client), from Python's ssl module
    in memory: no socket, no server."""
    out = []
    for maximum in (ssl.TLSVersion.MAXIMUM_SUPPORTED, ssl.TLSVersion.TLSv1_2):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.maximum_version = maximum
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        conn = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
        try:
            conn.do_handshake()
        except ssl.SSLWantReadError:
            pass
        out.append(outgoing.read())
    return out


def main() -> int:
    src = pathlib.Path(sys.argv[1])
    out = pathlib.Path(sys.argv[2])
    cases = src / "conformance" / "cases"
    corpora = {t: out / t for t in ("fuzz_syntax", "fuzz_snapshot", "fuzz_snapshot_diff",
                                    "fuzz_objects", "fuzz_admission", "fuzz_http", "fuzz_tls", "fuzz_session")}
    for d in corpora.values():
        d.mkdir(parents=True, exist_ok=True)

    def put(target: str, data: bytes) -> None:
        name = hashlib.sha1(data).hexdigest()
        (corpora[target] / name).write_bytes(data)

    def inputs(kind: str):
        for case_dir in sorted((cases / kind).iterdir()):
            for f in sorted(case_dir.glob("input.*")):
                yield f.read_bytes()

    def as_json(data: bytes):
        ok, obj = load_bounded(data)
        return json.dumps(obj, default=str).encode() if ok else None

    syntax_seeds = {b"topology.gpustack.ai/region", b"kubernetes.io/hostname", b"example.com/", b"a",
                    b"1h30m", b"-1.5\xc2\xb5s", b"0", b"+.5h", b"9223372036854775807ns", b"1d",
                    b"https://inventory.example:8443/snap?x=1#", b"https://@x", b"HTTPS://[::1]:443/a",
                    b"rack-01", b"a" * 63, b"a" * 64, b"a." * 126 + b"a"}
    for kind in ("snapshot", "topologysource", "modeldeployment"):
        for data in inputs(kind):
            # A large document adds thousands of near-identical names (worker-00001, ...).
            ok, doc = load_bounded(data) if len(data) <= 64 * 1024 else (False, None)
            if not ok:
                continue

            def walk(v):
                if isinstance(v, dict):
                    for k, x in v.items():
                        syntax_seeds.add(str(k).encode())
                        walk(x)
                elif isinstance(v, list):
                    for x in v:
                        walk(x)
                elif v is not None:
                    syntax_seeds.add(str(v).encode())
            walk(doc)
    for s in syntax_seeds:
        if len(s) <= 400:
            put("fuzz_syntax", s)

    for data in inputs("snapshot"):
        put("fuzz_snapshot", data)
        put("fuzz_objects", data)
        j = as_json(data)
        if j is not None:
            put("fuzz_snapshot", j)
            put("fuzz_snapshot_diff", j)
            put("fuzz_snapshot_diff", json.dumps(json.loads(j), indent=2).encode())
        if data.lstrip()[:1] in (b"{", b"["):
            put("fuzz_snapshot_diff", data)

    reviews = []
    for kind, route_bit, k8s_kind in (("topologysource", 0, "TopologySource"),
                                      ("modeldeployment", 1, "ModelDeployment")):
        for data in inputs(kind):
            put("fuzz_objects", data)
            ok, obj = load_bounded(data)
            if not ok:
                continue
            if isinstance(obj, dict) and obj.get("kind") == "AdmissionReview":
                review = obj
            else:
                review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                          "request": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                                      "kind": {"group": "worker.gpustack.ai", "version": "v1", "kind": k8s_kind},
                                      "operation": "CREATE", "object": obj}}
            body = json.dumps(review, default=str).encode()
            reviews.append((route_bit, body))
            put("fuzz_admission", bytes([route_bit | 2]) + body)
            put("fuzz_admission", bytes([route_bit]) + body)

    snapshot = (cases / "snapshot" / "runbook-data-center" / "input.yaml").read_bytes()
    small = (b"apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r1\nnodes:\n"
             b"  worker-a: {topology.gpustack.ai/region: region-a, topology.gpustack.ai/zone: zone-a, "
             b"topology.gpustack.ai/rack: rack-01}\n")
    requests = [
        b"GET /snapshots/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alpha-old\r\n\r\n",
        b"GET /snapshots/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alpha-ole\r\n\r\n",
        b"GET /snapshots/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alpha-new\r\n"
        b"Accept: application/yaml;q=0.9, application/json;q=0.1\r\nIf-None-Match: W/\"x\", *\r\n\r\n",
        b"GET /snapshots/beta HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /snapshots/%2e%2e/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alpha-old\r\n\r\n",
        b"GET /snapshot HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /readyz?verbose HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        b"PUT /snapshots/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer push-writer\r\n"
        b"Content-Type: application/yaml\r\nContent-Length: " + str(len(small)).encode() + b"\r\n\r\n" + small,
        b"PUT /snapshots/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alpha-writer\r\nIf-Match: \"x\"\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + format(len(snapshot), "x").encode() + b"\r\n" + snapshot +
        b"\r\n0\r\n\r\n",
    ]
    # The wire forms a hostile or unusual client sends: parser edge cases (chunk extensions,
    # trailers, obs-fold, bare LF, conflicting lengths, absolute and asterisk forms),
    # pipelining, authentication variants (scheme case, a token one byte off, a writer on a
    # read route) and path tricks on /snapshots/{name}.
    def chunked(data: bytes, size: int = 7) -> bytes:
        parts = [format(len(data[i:i + size]), "x").encode() + b";ext=1\r\n" + data[i:i + size] + b"\r\n"
                 for i in range(0, len(data), size)]
        return b"".join(parts) + b"0\r\nX-Trailer: t\r\n\r\n"
    alpha = b"Authorization: Bearer alpha-old\r\n"
    crlf_revision = small.replace(b"revision: r1", b'revision: "r2\\r\\nSet-Cookie: s=1"')
    assert crlf_revision != small
    requests += [
        b"HEAD /snapshots/alpha HTTP/1.1\r\nHost: x\r\n" + alpha + b"\r\n",
        b"GET /snapshots/alpha/status HTTP/1.1\r\nHost: x\r\nAuthorization: bearer alpha-writer\r\n\r\n",
        b"GET /snapshots/push/history HTTP/1.1\r\nHost: x\r\nAuthorization: BEARER \t alpha-new \r\n\r\n",
        b"GET /snapshots/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alpha-writeR\r\n\r\n",
        b"GET /snapshots/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YWxwaGEtb2xk\r\n\r\n",
        b"GET /snapshots/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer\r\n\r\n",
        b"GET /snapshots/alpha HTTP/1.1\r\nHost: x\r\n" + alpha + b"Authorization: Bearer nope\r\n\r\n",
        b"GET /snapshots/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer\r\n alpha-old\r\n\r\n",
        b"GET /snapshots/ HTTP/1.1\r\nHost: x\r\n" + alpha + b"\r\n",
        b"GET /snapshots/alpha/../beta HTTP/1.1\r\nHost: x\r\n" + alpha + b"\r\n",
        b"GET /snapshots/%61lpha HTTP/1.1\r\nHost: x\r\n" + alpha + b"\r\n",
        b"GET /snapshots/alpha%2f..%2fbeta?x=%00 HTTP/1.1\r\nHost: x\r\n" + alpha + b"\r\n",
        b"GET /snapshots//alpha HTTP/1.1\r\nHost: x\r\n" + alpha + b"\r\n",
        b"GET http://x/snapshots/alpha HTTP/1.1\r\nHost: x\r\n" + alpha + b"\r\n",
        b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
        b"CONNECT x:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /snapshots/alpha HTTP/1.0\r\n" + alpha + b"\n",
        b"GET /snapshots/alpha HTTP/1.1\nHost: x\n" + alpha.replace(b"\r\n", b"\n") + b"\n",
        b"GET /snapshots/alpha HTTP/1.1\r\nHost: x\r\n" + alpha + b"X-Long: " + b"a" * 8300 + b"\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
        b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /livez HTTP/1.1\r\n\r\n",
        b"GET /snapshots/alpha HTTP/1.1\r\nHost: x\r\n" + alpha + b"\r\n"
        b"GET /snapshots/alpha HTTP/1.1\r\nHost: x\r\n" + alpha + b"If-None-Match: *\r\n\r\n",
        b"POST /snapshots/alpha HTTP/1.1\r\nHost: x\r\n" + alpha + b"Content-Length: 0\r\n\r\n",
        b"DELETE /validate/topologysources HTTP/1.1\r\nHost: x\r\n\r\n",
        b"PUT /snapshots/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer push-writer\r\n"
        b"Topogate-Accept-Impact: *\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(small),
        b"PUT /snapshots/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alpha-old\r\n"
        b"Content-Length: " + str(len(small)).encode() + b"\r\n\r\n" + small,
        b"PUT /snapshots/beta HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
        b"PUT /snapshots/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer push-writer\r\n"
        b"Content-Length: 99999999999999999999\r\n\r\n",
        b"PUT /snapshots/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer push-writer\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n8001\r\n" + b"a" * 0x8001 + b"\r\n0\r\n\r\n",
        # A writer's revision with a line break, then a reader's GET on the same connection
        # (it was copied into X-Topogate-Revision: header injection).
        b"PUT /snapshots/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer push-writer\r\n"
        b"Topogate-Accept-Impact: *\r\nContent-Length: " + str(len(crlf_revision)).encode() + b"\r\n\r\n" +
        crlf_revision + b"GET /snapshots/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alpha-old\r\n\r\n",
        b"POST /validate/topologysources?timeout=-1s HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
        b"POST /validate/modeldeployments?timeout=1h&x HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + chunked(b'{"kind":"AdmissionReview","request":{}}', 5),
    ]
    # Admission reviews within the harness's 32 KiB admission limit, and one past it (413).
    fitting = [[rb for rb in reviews if rb[0] == bit and len(rb[1]) <= 30_000][:12] for bit in (0, 1)]
    over = [rb for rb in reviews if 32 * 1024 < len(rb[1]) <= 60_000][:1]
    for route_bit, body in fitting[0] + fitting[1] + over:
        path = b"/validate/modeldeployments" if route_bit else b"/validate/topologysources"
        requests.append(b"POST " + path + b"?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    # Byte 0: the client certificate (none, trusted, foreign) for every request; the plain
    # health listener and draining (fuzz_http.cpp, `conditions`) for the first few.
    for i, r in enumerate(requests):
        for first in (0, 1, 2) + ((3, 7, 9) if i < 12 else ()):
            put("fuzz_http", bytes([first]) + r)

    # fuzz_session (fuzz_session.cpp): byte 0 bit 0 picks the plain health listener, bits 1-2
    # how the bytes are cut into socket writes; the same requests, over the real server.
    for i, r in enumerate(requests):
        for first in ((0, 1, 2, 5) if i < 12 else (0, 3)):
            put("fuzz_session", bytes([first]) + r)
    put("fuzz_session", bytes([0]) + b"POST /validate/topologysources HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 40000\r\n\r\n")
    put("fuzz_session", bytes([2]) + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
    if reviews:
        body = reviews[0][1]
        put("fuzz_session", bytes([4]) + b"POST /validate/topologysources HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    # fuzz_tls (fuzz_tls.cpp): byte 0 % 3 picks raw bytes, a real client, or a real client
    # with one ciphertext byte changed; bit 0x10 makes the client TLS 1.2.
    for hello in client_hellos():
        put("fuzz_tls", b"\x00" + hello)
    put("fuzz_tls", b"\x00" + requests[0])
    # Scripts: writes of assorted sizes, socket reads and read buffers of assorted sizes,
    # answers, and closes from either side (see run_client for the opcodes).
    scripts = [bytes([0, 0, 100, 3, 10, 200, 3, 255, 255, 5, 1, 0, 6, 7]),
               bytes([0, 0x9c, 0x40, 3, 250, 250, 3, 7, 7, 5, 0x9c, 0x40, 7, 6]),
               bytes([1, 3, 0, 2, 4, 1, 1, 5, 0, 10, 6]),
               bytes(range(0, 64)),
               bytes([2, 0x40, 0x00, 4, 255, 255] * 5 + [6])]
    for script in scripts:
        for first in (1, 0x11):
            put("fuzz_tls", bytes([first, 0x12, 0x34]) + script)
        for first, at in ((2, 0), (2, 5), (2, 40), (0x12, 3), (0x12, 100)):
            put("fuzz_tls", bytes([first, 0x12, 0x34]) + at.to_bytes(2, "big") + b"\x01" + script)
    for d in corpora.values():
        print(f"{d.name}: {sum(1 for _ in d.iterdir())} seeds")
    return 0


if __name__ == "__main__":
    threading.stack_size(STACK_BYTES)
    status = []
    worker = threading.Thread(target=lambda: status.append(main()))
    worker.start()
    worker.join()
    sys.exit(status[0] if status else 1)
