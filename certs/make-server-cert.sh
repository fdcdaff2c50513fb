#!/usr/bin/env bash
# Makes a TLS server certificate signed by a CA from make-ca.sh:
# OUT/NAME.crt (leaf only), OUT/NAME.key and OUT/NAME-chain.crt (leaf + CA).
#
# With --service/--namespace the certificate is valid for the names the
# Kubernetes apiserver and in-cluster clients dial: <svc>.<ns>.svc (what the
# apiserver uses for a webhook clientConfig.service) and
# <svc>.<ns>.svc.cluster.local, plus <svc> and <svc>.<ns>. Extra names and
# addresses with --dns/--ip (repeatable). The first name is also the subject CN.
# Re-running with the same arguments keeps a current certificate.
#
# Usage: make-server-cert.sh --ca-cert CA.crt --ca-key CA.key --out DIR
#          [--name server] [--service SVC --namespace NS]
#          [--cluster-domain cluster.local] [--dns NAME]... [--ip ADDR]...
#          [--days 365] [--key-type ecdsa|rsa|rsa2048] [--force]
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

ca_crt= ca_key= out= name=server svc= ns= domain=cluster.local days=365 key_type=ecdsa force=0
dns=() ips=()
while (($#)); do
  case $1 in
    --ca-cert) ca_crt=$2; shift 2 ;;
    --ca-key) ca_key=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --service) svc=$2; shift 2 ;;
    --namespace) ns=$2; shift 2 ;;
    --cluster-domain) domain=$2; shift 2 ;;
    --dns) dns+=("$2"); shift 2 ;;
    --ip) ips+=("$2"); shift 2 ;;
    --days) days=$2; shift 2 ;;
    --key-type) key_type=$2; shift 2 ;;
    --force) force=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) certs_die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -n $ca_crt && -n $ca_key && -n $out ]] || certs_die "--ca-cert, --ca-key and --out are required"
[[ -s $ca_crt && -s $ca_key ]] || certs_die "CA files not found: $ca_crt $ca_key"
[[ -z $svc && -z $ns || -n $svc && -n $ns ]] || certs_die "--service and --namespace go together"
certs_check_days "$days"

names=()
if [[ -n $svc ]]; then
  names+=("$svc.$ns.svc" "$svc.$ns.svc.$domain" "$svc.$ns" "$svc")
fi
names+=("${dns[@]}")
((${#names[@]} + ${#ips[@]} > 0)) || certs_die "give --service/--namespace, --dns or --ip"
for ip in "${ips[@]}"; do
  [[ $ip =~ ^[0-9.]+$ || $ip =~ ^[0-9A-Fa-f:]+$ ]] || certs_die "--ip '$ip' is not an IP address"
done

san=
for n in "${names[@]}"; do san+="${san:+, }DNS:$n"; done
for ip in "${ips[@]}"; do san+="${san:+, }IP:$ip"; done
cn=${names[0]:-${ips[0]}}

mkdir -p "$out"
crt="$out/$name.crt" key="$out/$name.key" pfile="$out/$name.params"
params="server|$san|$days|$key_type|$(openssl x509 -in "$ca_crt" -noout -fingerprint -sha256)"
if ((!force)) && certs_is_current "$crt" "$key" "$ca_crt" "$pfile" "$params"; then
  certs_log "$crt is current, kept"
  exit 0
fi

certs_genkey "$key_type" "$key"
# Clients match the host against subjectAltName only (RFC 6125; Go ignores the
# CN), so every name goes there. serverAuth EKU: Go and OpenSSL both check it.
certs_sign "/CN=$(certs_subj_escape "${cn:0:64}")" "$key" "$ca_crt" "$ca_key" "$days" "$crt" "[ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = $san
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid"
cat "$crt" "$ca_crt" >"$out/$name-chain.crt"
chmod 644 "$out/$name-chain.crt"
printf '%s' "$params" >"$pfile"
certs_log "wrote $crt ($san)"
