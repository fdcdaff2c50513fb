# Shared helpers for the certificate scripts in this folder (sourced, not run).
# Keys are written mode 0600 in PKCS#8 PEM, which OpenSSL, Go's crypto/tls and
# Kubernetes Secrets (tls.key) all read.

set -euo pipefail
umask 077

certs_die() { echo "$(basename "$0"): $*" >&2; exit 2; }
certs_log() { [[ ${CERTS_QUIET:-0} == 1 ]] || echo "$(basename "$0"): $*" >&2; }

command -v openssl >/dev/null || certs_die "openssl not found in PATH"

# certs_genkey TYPE FILE: ECDSA P-256 (default; smallest handshake, accepted by
# every TLS 1.2+ client) or RSA 3072 for environments that still require RSA.
certs_genkey() {
  local type=$1 out=$2 tmp
  tmp=$(mktemp "$out.XXXXXX")
  case $type in
    ecdsa|ec|p256)
      openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
        -pkeyopt ec_param_enc:named_curve -out "$tmp" 2>/dev/null ;;
    rsa|rsa3072)
      openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072 -out "$tmp" 2>/dev/null ;;
    rsa2048)
      openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$tmp" 2>/dev/null ;;
    *) rm -f "$tmp"; certs_die "unknown key type '$type' (ecdsa, rsa, rsa2048)" ;;
  esac
  chmod 600 "$tmp"
  mv -f "$tmp" "$out"
}

# certs_subj_escape VALUE: escape the characters openssl -subj treats specially.
certs_subj_escape() {
  local v=$1
  v=${v//\\/\\\\}
  v=${v//\//\\/}
  v=${v//+/\\+}
  v=${v//=/\\=}
  printf '%s' "$v"
}

# certs_serial: 127 random bits, positive, as RFC 5280 4.1.2.2 asks (≤ 20 octets,
# unpredictable).
certs_serial() { echo "0x$(openssl rand -hex 16 | sed 's/^./7/')"; }

# certs_is_current CERT KEY CA PARAMS_FILE PARAMS: true when CERT exists, was
# made with the same PARAMS, matches KEY, chains to CA and is valid for at
# least another CERTS_MIN_REMAINING seconds (a tenth of the lifetime, at most a
# day; see certs_check_days). Re-running a script is then a no-op.
certs_is_current() {
  local crt=$1 key=$2 ca=$3 pfile=$4 params=$5
  [[ -s $crt && -s $key && -s $pfile ]] || return 1
  [[ $(cat "$pfile") == "$params" ]] || return 1
  openssl x509 -in "$crt" -noout -checkend "${CERTS_MIN_REMAINING:-86400}" >/dev/null 2>&1 || return 1
  if [[ -n $ca ]]; then
    openssl verify -CAfile "$ca" "$crt" >/dev/null 2>&1 || return 1
  fi
  [[ $(openssl x509 -in "$crt" -noout -pubkey 2>/dev/null | openssl sha256) == \
     $(openssl pkey -in "$key" -pubout 2>/dev/null | openssl sha256) ]] || return 1
}

# certs_sign CSR_SUBJ KEY CA_CRT CA_KEY DAYS OUT EXTENSIONS(multi-line)
certs_sign() {
  local subj=$1 key=$2 ca_crt=$3 ca_key=$4 days=$5 out=$6 ext=$7
  local work
  work=$(mktemp -d)
  printf '%s\n' "$ext" >"$work/ext.cnf"
  openssl req -new -key "$key" -subj "$subj" -out "$work/req.csr" 2>/dev/null
  openssl x509 -req -in "$work/req.csr" -CA "$ca_crt" -CAkey "$ca_key" \
    -set_serial "$(certs_serial)" -days "$days" -sha256 \
    -extfile "$work/ext.cnf" -extensions ext -out "$work/out.crt" 2>/dev/null ||
    { rm -rf "$work"; certs_die "signing failed"; }
  chmod 644 "$work/out.crt"
  mv -f "$work/out.crt" "$out"
  rm -rf "$work"
}

certs_check_days() {
  [[ $1 =~ ^[1-9][0-9]*$ ]] || certs_die "--days must be a positive integer, got '$1'"
  CERTS_MIN_REMAINING=$(($1 * 8640 < 86400 ? $1 * 8640 : 86400))
}
