#!/usr/bin/env bash
# Makes a self-signed certificate authority for development, tests and demos:
# OUT/NAME.crt and OUT/NAME.key. Re-running with the same arguments keeps an
# existing, still valid CA (so certificates it signed stay valid); --force
# makes a new one.
#
# Usage: make-ca.sh --out DIR [--name ca] [--cn "topogate dev CA"]
#                   [--days 3650] [--key-type ecdsa|rsa|rsa2048] [--force]
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

out= name=ca cn="topogate dev CA" days=3650 key_type=ecdsa force=0
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --cn) cn=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    --key-type) key_type=$2; shift 2 ;;
    --force) force=1; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) certs_die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -n $out ]] || certs_die "--out DIR is required"
certs_check_days "$days"
mkdir -p "$out"

crt="$out/$name.crt" key="$out/$name.key" pfile="$out/$name.params"
params="ca|$cn|$days|$key_type"
if ((!force)) && certs_is_current "$crt" "$key" "" "$pfile" "$params"; then
  certs_log "$crt is current, kept"
  exit 0
fi

certs_genkey "$key_type" "$key"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A CA needs basicConstraints CA:TRUE and keyCertSign (RFC 5280 4.2.1.9/4.2.1.3);
# Go's x509 verifier rejects a chain whose root lacks them.
cat >"$work/ca.cnf" <<'EOF'
[req]
distinguished_name = dn
x509_extensions = ext
prompt = no
[dn]
[ext]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
EOF
openssl req -x509 -new -config "$work/ca.cnf" -key "$key" -sha256 \
  -subj "/CN=$(certs_subj_escape "$cn")" -days "$days" \
  -set_serial "$(certs_serial)" -out "$work/ca.crt" 2>/dev/null
chmod 644 "$work/ca.crt"
mv -f "$work/ca.crt" "$crt"
printf '%s' "$params" >"$pfile"
certs_log "wrote $crt and $key"
