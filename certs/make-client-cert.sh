#!/usr/bin/env bash
# Makes a TLS client certificate for mTLS readers and writers of topogate's
# snapshot endpoint (and for the Kubernetes apiserver's x509 authentication,
# which maps CN to the user name and each O to a group):
# OUT/NAME.crt, OUT/NAME.key.
#
# topogate's allowedSubjects matches the subject CN; allowedSANs matches a
# DNS, URI or email subjectAltName. Re-running with the same arguments keeps a
# current certificate.
#
# Usage: make-client-cert.sh --ca-cert CA.crt --ca-key CA.key --out DIR --cn CN
#          [--name client] [--org O]... [--dns NAME]... [--uri URI]...
#          [--email ADDR]... [--days 365] [--key-type ecdsa|rsa|rsa2048] [--force]
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

ca_crt= ca_key= out= name=client cn= days=365 key_type=ecdsa force=0
orgs=() sans=()
while (($#)); do
  case $1 in
    --ca-cert) ca_crt=$2; shift 2 ;;
    --ca-key) ca_key=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --cn) cn=$2; shift 2 ;;
    --org) orgs+=("$2"); shift 2 ;;
    --dns) sans+=("DNS:$2"); shift 2 ;;
    --uri) sans+=("URI:$2"); shift 2 ;;
    --email) sans+=("email:$2"); shift 2 ;;
    --days) days=$2; shift 2 ;;
    --key-type) key_type=$2; shift 2 ;;
    --force) force=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) certs_die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -n $ca_crt && -n $ca_key && -n $out && -n $cn ]] || certs_die "--ca-cert, --ca-key, --out and --cn are required"
[[ -s $ca_crt && -s $ca_key ]] || certs_die "CA files not found: $ca_crt $ca_key"
((${#cn} <= 64)) || certs_die "--cn is longer than 64 characters (RFC 5280 ub-common-name)"
certs_check_days "$days"

subj=
for o in "${orgs[@]}"; do subj+="/O=$(certs_subj_escape "$o")"; done
subj+="/CN=$(certs_subj_escape "$cn")"
san=
for s in "${sans[@]}"; do san+="${san:+, }$s"; done

mkdir -p "$out"
crt="$out/$name.crt" key="$out/$name.key" pfile="$out/$name.params"
params="client|$subj|$san|$days|$key_type|$(openssl x509 -in "$ca_crt" -noout -fingerprint -sha256)"
if ((!force)) && certs_is_current "$crt" "$key" "$ca_crt" "$pfile" "$params"; then
  certs_log "$crt is current, kept"
  exit 0
fi

certs_genkey "$key_type" "$key"
ext="[ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid"
[[ -n $san ]] && ext+="
subjectAltName = $san"
certs_sign "$subj" "$key" "$ca_crt" "$ca_key" "$days" "$crt" "$ext"
printf '%s' "$params" >"$pfile"
certs_log "wrote $crt (subject $subj${san:+, $san})"
