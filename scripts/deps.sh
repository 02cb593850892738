#!/usr/bin/env bash
# Installs what replab needs on a Debian 12 machine, for one purpose:
#   scripts/deps.sh build|demo|test|bench
# Idempotent: installs only what is missing. Needs root for packages.
set -euo pipefail
purpose=${1:-build}

say() { echo "deps: $*" >&2; }

apt_updated=0
apt_install() {
  # $@: package names; installs those missing.
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    say "missing Debian packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})"
    exit 1
  fi
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [ $apt_updated -eq 0 ]; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
    apt_updated=1
  fi
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    say "Go is missing: install Go >= 1.21 (it fetches the 1.26 toolchain go.mod asks for through the module proxy)"
    exit 1
  fi
  go mod download
}

need_lab() {
  command -v ip >/dev/null 2>&1 || apt_install iproute2
  if [ ! -e /dev/net/tun ]; then
    modprobe tun 2>/dev/null || true
  fi
  if [ ! -e /dev/net/tun ]; then
    say "/dev/net/tun is missing and 'modprobe tun' did not create it: replab needs the tun module"
    exit 1
  fi
}

need_postgres() {
  # Server binaries, and pglogical for multi-master.
  apt_install postgresql-15 postgresql-15-pglogical
}

case "$purpose" in
  build) need_go ;;
  demo)  need_go; need_lab; need_postgres ;;
  test)  need_go; need_lab; need_postgres; command -v chromium >/dev/null 2>&1 || apt_install chromium ;;
  bench) need_go; need_lab; need_postgres; command -v iperf3 >/dev/null 2>&1 || apt_install iperf3 ;;
  *) say "unknown purpose $purpose (build|demo|test|bench)"; exit 2 ;;
esac
