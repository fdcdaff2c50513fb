# Sourced by the README's commands after scripts/install-deps.sh: when no Go >= 1.26 is on
# PATH, the toolchain install-deps.sh unpacked into the cache goes first on PATH.
_tg_go_dir=${TOPOGATE_CACHE:-${HOME:-/root}/.cache/topogate}/go-1.26.8
_tg_go_new_enough() {
  local v
  v=$(go env GOVERSION 2>/dev/null) || return 1
  v=${v#go}
  [[ $v =~ ^1\.([0-9]+) ]] && ((BASH_REMATCH[1] >= 26))
}
if ! _tg_go_new_enough && [[ -x $_tg_go_dir/bin/go ]]; then
  export PATH=$_tg_go_dir/bin:$PATH
fi
unset -f _tg_go_new_enough
unset _tg_go_dir
