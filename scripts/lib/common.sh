# shellcheck shell=bash
# scripts/lib/common.sh - helpers shared by scripts/setup, scripts/lab-swarm, scripts/test, scripts/run.
# Source it; it defines functions only. Everything it prints goes to stderr.

log() { printf '[%s] %s%s\n' "$(date +%T)" "${LOG_TAG:-}" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# wait_until SECONDS INTERVAL CMD... : poll CMD until it succeeds; non-zero after SECONDS
wait_until() {
  local limit=$1 interval=$2 end
  shift 2
  end=$((SECONDS + limit))
  while :; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    ((SECONDS < end)) || return 1
    sleep "$interval"
  done
}

# ---------------------------------------------------------------- Debian packages
# Queue packages with need_cmd / need_deb, then call install_missing_pkgs:
# one `apt-get update` and one `apt-get install` for whatever is missing, nothing when all is there.
MISSING_PKGS=()
need_cmd() { # CMD PKG : PKG is needed when CMD is not on PATH
  command -v "$1" >/dev/null 2>&1 || MISSING_PKGS+=("$2")
}
need_deb() { # PKG : PKG must be installed (dpkg status)
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed' || MISSING_PKGS+=("$1")
}

# The packages the swarm lab needs (docker.io pulls in tini for `init: true`).
need_lab_pkgs() {
  need_cmd dockerd docker.io
  need_cmd docker docker.io
  need_cmd docker-init docker.io
  need_cmd containerd containerd
  need_cmd runc runc
  need_cmd iptables iptables
  need_cmd ip iproute2
  need_cmd nsenter util-linux
  need_cmd unshare util-linux
  need_cmd flock util-linux
  need_cmd curl curl
  need_cmd jq jq
  need_deb busybox-static   # the lab image is a static busybox
}

install_missing_pkgs() {
  ((${#MISSING_PKGS[@]})) || return 0
  local pkgs
  pkgs=$(printf '%s\n' "${MISSING_PKGS[@]}" | sort -u | tr '\n' ' ')
  MISSING_PKGS=()
  [ "$(id -u)" = 0 ] || die "missing Debian packages ($pkgs); run as root to install them"
  log "installing Debian packages: $pkgs"
  # Keep maintainer scripts from starting a default dockerd/prometheus: policy-rc.d must answer 101.
  local prc=/usr/sbin/policy-rc.d moved=0 made=0 rc=0
  if [ -e "$prc" ]; then
    local prc_rc=0
    "$prc" >/dev/null 2>&1 || prc_rc=$?
    if [ "$prc_rc" != 101 ]; then mv "$prc" "$prc.shoal-bak"; moved=1; fi
  fi
  if [ ! -e "$prc" ]; then printf '#!/bin/sh\nexit 101\n' >"$prc"; chmod 755 "$prc"; made=1; fi
  # shellcheck disable=SC2086  # word splitting of the package list is intended
  {
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive timeout 1800 apt-get install -y -qq --no-install-recommends $pkgs
  } >&2 || rc=$?
  if ((made)); then rm -f "$prc"; fi
  if ((moved)); then mv "$prc.shoal-bak" "$prc"; fi
  ((rc == 0)) || die "apt-get install failed (exit $rc) for: $pkgs"
}
