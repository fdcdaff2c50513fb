#!/usr/bin/env bash
# Tests certs/make-*.sh: the certificates verify for the names, purposes and
# lifetimes asked, keys are private, re-runs are no-ops, changed arguments and
# --force make new certificates, and bad arguments fail.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
c="$repo/certs"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
export CERTS_QUIET=1
fails=0 checks=0
ok() { checks=$((checks + 1)); }
bad() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*" >&2; }
expect() { local msg=$1; shift; if "$@" >/dev/null 2>&1; then ok; else bad "$msg"; fi; }
expect_not() { local msg=$1; shift; if "$@" >/dev/null 2>&1; then bad "$msg"; else ok; fi; }
fp() { openssl x509 -in "$1" -noout -fingerprint -sha256; }
text() { openssl x509 -in "$1" -noout -text; }

# CA
"$c/make-ca.sh" --out "$d" --cn "test CA"
expect "CA is self-signed and verifies" openssl verify -CAfile "$d/ca.crt" "$d/ca.crt"
expect "CA has CA:TRUE" grep -q "CA:TRUE" <(text "$d/ca.crt")
expect "CA has keyCertSign" grep -q "Certificate Sign" <(text "$d/ca.crt")
expect "CA key is ECDSA P-256 by default" grep -q "prime256v1" <(text "$d/ca.crt")
expect "CA key mode 600" test "$(stat -c %a "$d/ca.key")" = 600
ca_fp=$(fp "$d/ca.crt")
"$c/make-ca.sh" --out "$d" --cn "test CA"
expect "CA re-run keeps the CA" test "$ca_fp" = "$(fp "$d/ca.crt")"

# Server certificate
srv() { "$c/make-server-cert.sh" --ca-cert "$d/ca.crt" --ca-key "$d/ca.key" --out "$d" "$@"; }
srv --service topogate --namespace gpustack-system --ip 127.0.0.1 --dns localhost --days 30
for h in topogate.gpustack-system.svc topogate.gpustack-system.svc.cluster.local localhost; do
  expect "server cert valid for $h" openssl verify -CAfile "$d/ca.crt" -purpose sslserver -verify_hostname "$h" "$d/server.crt"
done
expect "server cert valid for 127.0.0.1" openssl verify -CAfile "$d/ca.crt" -purpose sslserver -verify_ip 127.0.0.1 "$d/server.crt"
expect_not "server cert not valid for other.gpustack-system.svc" openssl verify -CAfile "$d/ca.crt" -verify_hostname other.gpustack-system.svc "$d/server.crt"
expect_not "server cert not valid for 127.0.0.2" openssl verify -CAfile "$d/ca.crt" -verify_ip 127.0.0.2 "$d/server.crt"
expect_not "server cert is not a client cert" openssl verify -CAfile "$d/ca.crt" -purpose sslclient "$d/server.crt"
expect "server cert lives 30 days, not 31" bash -c "openssl x509 -in '$d/server.crt' -noout -checkend $((29 * 86400)) && ! openssl x509 -in '$d/server.crt' -noout -checkend $((30 * 86400 + 60))"
expect "server key matches cert" test "$(openssl x509 -in "$d/server.crt" -noout -pubkey)" = "$(openssl pkey -in "$d/server.key" -pubout)"
expect "chain file is leaf + CA" test "$(grep -c BEGIN "$d/server-chain.crt")" = 2
expect "server key mode 600" test "$(stat -c %a "$d/server.key")" = 600
s_fp=$(fp "$d/server.crt")
srv --service topogate --namespace gpustack-system --ip 127.0.0.1 --dns localhost --days 30
expect "server re-run keeps the cert" test "$s_fp" = "$(fp "$d/server.crt")"
srv --service topogate --namespace gpustack-system --ip 127.0.0.1 --dns localhost --days 30 --force
expect "--force makes a new cert" test "$s_fp" != "$(fp "$d/server.crt")"
s_fp=$(fp "$d/server.crt")
srv --service topogate --namespace other --days 30
expect "changed names make a new cert" test "$s_fp" != "$(fp "$d/server.crt")"
expect "new cert has the new names" openssl verify -CAfile "$d/ca.crt" -verify_hostname topogate.other.svc "$d/server.crt"
srv --name rsa --dns localhost --key-type rsa --days 1
expect "RSA key type" grep -q "Public-Key: (3072 bit)" <(text "$d/rsa.crt")
r_fp=$(fp "$d/rsa.crt")
srv --name rsa --dns localhost --key-type rsa --days 1
expect "one-day cert is kept on re-run" test "$r_fp" = "$(fp "$d/rsa.crt")"

# A new CA invalidates certificates signed by the old one: re-running re-signs.
"$c/make-ca.sh" --out "$d" --name ca2
"$c/make-server-cert.sh" --ca-cert "$d/ca2.crt" --ca-key "$d/ca2.key" --out "$d" --name rsa --dns localhost --key-type rsa --days 1
expect "cert re-signed by the new CA" openssl verify -CAfile "$d/ca2.crt" "$d/rsa.crt"

# Client certificate
cli() { "$c/make-client-cert.sh" --ca-cert "$d/ca.crt" --ca-key "$d/ca.key" --out "$d" "$@"; }
cli --name writer --cn inventory-writer --org writers --org system:masters --dns writer.example --uri spiffe://example/writer
expect "client cert is a client cert" openssl verify -CAfile "$d/ca.crt" -purpose sslclient "$d/writer.crt"
expect_not "client cert is not a server cert" openssl verify -CAfile "$d/ca.crt" -purpose sslserver "$d/writer.crt"
subj=$(openssl x509 -in "$d/writer.crt" -noout -subject -nameopt RFC2253)
expect "client subject CN and both O" test "$subj" = "subject=CN=inventory-writer,O=system:masters,O=writers"
expect "client SANs" grep -q "DNS:writer.example, URI:spiffe://example/writer" <(text "$d/writer.crt")
cli --name odd --cn 'a/b=c+d'
expect "special characters in CN survive" test "$(openssl x509 -in "$d/odd.crt" -noout -subject -nameopt RFC2253)" = 'subject=CN=a/b=c\+d'

# Bad arguments
expect_not "server cert without names fails" srv --name x
expect_not "service without namespace fails" srv --name x --service s
expect_not "bad --days fails" srv --name x --dns a --days 0
expect_not "bad key type fails" srv --name x --dns a --key-type dsa
expect_not "client without --cn fails" cli --name x
expect_not "CN over 64 chars fails" cli --name x --cn "$(printf 'a%.0s' {1..65})"
expect_not "missing CA fails" "$c/make-server-cert.sh" --ca-cert "$d/none.crt" --ca-key "$d/none.key" --out "$d" --dns a

echo "certs-test: $((checks - fails)) passed, $fails failed"
((fails == 0))
