"""A1 over HTTPS: AdmissionReview fixtures posted with Python's http.client, and the
same handler through `topogate review FILE`."""

import http.client
import json
import ssl
import subprocess

import pytest

from conftest import FIXTURES, k8s_status

ADMISSION = FIXTURES / "admission"


def post(server, pki, path, body: bytes, content_type="application/json"):
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=30)
    headers = {"Content-Type": content_type} if content_type is not None else {}
    conn.request("POST", path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def review(server, pki, fixture, route="topologysources"):
    status, data = post(server, pki, f"/validate/{route}?timeout=10s", (ADMISSION / fixture).read_bytes())
    return status, json.loads(data)


def rules(resp):
    causes = resp["response"]["status"]["details"]["causes"]
    return sorted(c["message"][1:c["message"].index("]")] for c in causes)


def test_allowed(server, pki):
    status, r = review(server, pki, "allowed.json")
    assert status == 200
    assert r["apiVersion"] == "admission.k8s.io/v1" and r["kind"] == "AdmissionReview"
    assert r["response"] == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}


def test_denied_with_every_field_error(server, pki):
    status, r = review(server, pki, "denied.json")
    assert status == 200
    resp = r["response"]
    assert resp["uid"] == "9c1f2b7e-0d3a-4f55-9a8e-0b5e2c6d7f10"
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 422 and resp["status"]["reason"] == "Invalid"
    assert rules(r) == sorted(["T3", "T4", "T6", "T9", "T11", "T13"])
    msg = resp["status"]["message"]
    assert msg.startswith('TopologySource.worker.gpustack.ai "inventory-service" is invalid: [')
    for cause in resp["status"]["details"]["causes"]:
        assert cause["field"] + ": " in msg
        assert cause["reason"].startswith("FieldValue")


def test_warnings(server, pki):
    status, r = review(server, pki, "warnings.json")
    assert status == 200 and r["response"]["allowed"] is True
    warnings = r["response"]["warnings"]
    assert warnings
    for w in warnings:
        assert len(w.encode()) <= 120 and all(ord(c) >= 0x20 for c in w)


def test_delete_is_allowed(server, pki):
    _, r = review(server, pki, "delete.json")
    assert r["response"] == {"uid": "e4d1c3b2-a190-4f8e-9d7c-6b5a4f3e2d1c", "allowed": True}


def test_update_validates_new_object(server, pki):
    _, r = review(server, pki, "update_denied.json")
    assert r["response"]["allowed"] is False


def test_v1beta1_answered_in_kind(server, pki):
    _, r = review(server, pki, "v1beta1_denied.json")
    assert r["apiVersion"] == "admission.k8s.io/v1beta1"
    assert r["response"]["uid"] == "11111111-2222-4333-8444-555555555555"
    assert r["response"]["allowed"] is False
    _, r = review(server, pki, "v1beta1_allowed.json")
    assert r["apiVersion"] == "admission.k8s.io/v1beta1" and r["response"]["allowed"] is True


def test_unhandled_kind_is_allowed(server, pki):
    _, r = review(server, pki, "other_kind.json")
    assert r["response"]["allowed"] is True
    _, r = review(server, pki, "denied.json", route="modeldeployments")
    assert r["response"]["allowed"] is True


def test_model_deployment(server, pki):
    _, r = review(server, pki, "modeldeployment_denied.json", route="modeldeployments")
    assert r["response"]["allowed"] is False
    assert rules(r) == ["M1", "M2"]
    _, r = review(server, pki, "modeldeployment_allowed.json", route="modeldeployments")
    assert r["response"]["allowed"] is True


@pytest.mark.parametrize("fixture", [
    "malformed_not_json.txt", "malformed_missing_uid.json", "malformed_no_request.json",
    "malformed_wrong_api_version.json", "malformed_wrong_kind.json", "malformed_truncated.json",
    "malformed_array.json"])
def test_malformed_is_400(server, pki, fixture):
    status, data = post(server, pki, "/validate/topologysources", (ADMISSION / fixture).read_bytes())
    assert status == 400
    doc = json.loads(data)
    assert doc["kind"] == "Status" and doc["code"] == 400 and doc["message"]


def test_empty_body_is_400(server, pki):
    assert post(server, pki, "/validate/topologysources", b"")[0] == 400


def test_wrong_content_type_is_415(server, pki):
    body = (ADMISSION / "allowed.json").read_bytes()
    assert post(server, pki, "/validate/topologysources", body, "text/plain")[0] == 415
    assert post(server, pki, "/validate/topologysources", body, None)[0] == 415
    assert post(server, pki, "/validate/topologysources", body, "application/json; charset=utf-8")[0] == 200


def test_body_limit_7_mib(server, pki):
    base = (ADMISSION / "allowed.json").read_bytes().rstrip()
    limit = 7 * 1024 * 1024
    at_limit = base + b" " * (limit - len(base))
    assert post(server, pki, "/validate/topologysources", at_limit)[0] == 200
    status, body = post(server, pki, "/validate/topologysources", at_limit + b" ")
    assert status == 413
    k8s_status(body, 413, "RequestEntityTooLarge")


def test_bad_timeout_parameter(server, pki):
    body = (ADMISSION / "allowed.json").read_bytes()
    status, answer = post(server, pki, "/validate/topologysources?timeout=soon", body)
    assert status == 400
    assert "timeout" in k8s_status(answer, 400, "BadRequest")["message"]
    assert post(server, pki, "/validate/topologysources?timeout=30s", body)[0] == 200


def test_get_is_405(server, pki):
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx)
    conn.request("GET", "/validate/topologysources")
    r = conn.getresponse()
    assert r.status == 405 and r.getheader("Allow") == "POST"
    k8s_status(r.read(), 405, "MethodNotAllowed")


def test_review_command(binary):
    p = subprocess.run([binary, "review", str(ADMISSION / "denied.json")], capture_output=True, text=True)
    assert p.returncode == 1
    r = json.loads(p.stdout)
    assert r["response"]["uid"] == "9c1f2b7e-0d3a-4f55-9a8e-0b5e2c6d7f10" and r["response"]["allowed"] is False
    p = subprocess.run([binary, "review", str(ADMISSION / "modeldeployment_denied.json")], capture_output=True, text=True)
    assert p.returncode == 1
    p = subprocess.run([binary, "review", str(ADMISSION / "allowed.json")], capture_output=True, text=True)
    assert p.returncode == 0 and json.loads(p.stdout)["response"]["allowed"] is True
    p = subprocess.run([binary, "review", str(ADMISSION / "malformed_not_json.txt")], capture_output=True, text=True)
    assert p.returncode == 2 and json.loads(p.stdout)["code"] == 400
