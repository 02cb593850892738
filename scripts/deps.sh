#!/usr/bin/env bash
# Installs what replab needs on a Debian 12 machine, for one purpose:
#   scripts/deps.sh build|demo|test|bench|ha
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

need_mariadb() {
  # MariaDB 10.11, Galera 4 and the client. replab starts its own servers with its own
  # --defaults-file: the packages' service must neither start now nor be left enabled.
  local pkgs=(mariadb-server galera-4 mariadb-client rsync) missing=0 p
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing=1
  done
  [ $missing -eq 0 ] && return 0
  local guard=/usr/sbin/policy-rc.d own_guard=0
  if [ "$(id -u)" -eq 0 ] && [ ! -e $guard ]; then
    # invoke-rc.d asks policy-rc.d; 101 = "action forbidden": no service starts during the install.
    printf '#!/bin/sh\nexit 101\n' >$guard && chmod 755 $guard && own_guard=1
  fi
  apt_install "${pkgs[@]}" || { [ $own_guard -eq 1 ] && rm -f $guard; exit 1; }
  [ $own_guard -eq 1 ] && rm -f $guard
  # The package enables its unit; disabling works without a running systemd too.
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable mariadb.service >/dev/null 2>&1 || true
    [ -d /run/systemd/system ] && { systemctl stop mariadb.service >/dev/null 2>&1 || true; }
  fi
  return 0
}

# no_services GUARD_CMD...: runs an install with invoke-rc.d forbidden to start anything
# (policy-rc.d exit 101), removing the guard afterwards if it put it there.
no_services() {
  local guard=/usr/sbin/policy-rc.d own_guard=0 rc=0
  if [ "$(id -u)" -eq 0 ] && [ ! -e $guard ]; then
    printf '#!/bin/sh\nexit 101\n' >$guard && chmod 755 $guard && own_guard=1
  fi
  "$@" || rc=$?
  [ $own_guard -eq 1 ] && rm -f $guard
  return $rc
}

need_ha() {
  # The HA managers of [scheme] manager (docs/failover.md): Patroni with etcd as its store,
  # repmgr, pg_auto_failover, and haproxy for route = "haproxy". replab runs every one of
  # them itself, in the sites, with its own configuration: the packages' services must
  # neither start now nor be left enabled.
  local pkgs=(patroni python3-etcd etcd-server etcd-client haproxy postgresql-15-repmgr
              postgresql-15-auto-failover pg-auto-failover-cli) missing=0 p
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing=1
  done
  [ $missing -eq 0 ] && return 0
  no_services apt_install "${pkgs[@]}" || exit 1
  if command -v systemctl >/dev/null 2>&1; then
    for p in etcd patroni haproxy repmgrd; do
      systemctl disable "$p.service" >/dev/null 2>&1 || true
      [ -d /run/systemd/system ] && { systemctl stop "$p.service" >/dev/null 2>&1 || true; }
    done
  fi
  # Packages whose maintainer scripts start a daemon without invoke-rc.d: stop what runs
  # outside any lab (replab's own run in network namespaces and are not touched).
  for p in etcd haproxy; do
    pgrep -x "$p" >/dev/null 2>&1 && for pid in $(pgrep -x "$p"); do
      [ "$(readlink /proc/$pid/ns/net)" = "$(readlink /proc/1/ns/net)" ] && kill "$pid" 2>/dev/null
    done
  done
  return 0
}

need_xrootd() {
  # The XRootD data server (the page-read study's server) and its client tools (xrdfs, xrdcp);
  # the packages ship template units only (xrootd@NAME): no service starts.
  apt_install xrootd-server xrootd-client
}

need_storage() {
  # Storage classes (docs/storage.md): san = nbdkit in the storage site, nbdfuse + a loop device
  # + ext4 in the node's site; nas = OpenSSH's sftp-server in the storage site (run by replab
  # per connection, no sshd: openssh-sftp-server ships no service) and sshfs in the node's site.
  apt_install nbdkit libnbd-bin fuse3 e2fsprogs sshfs openssh-sftp-server
}

need_java() {
  # Berkeley DB Java Edition HA (engine bdbje): a JDK compiles and runs replab's node program,
  # Maven fetches JE (com.sleepycat:je) from Maven Central on first use into /var/cache/replab/bdbje.
  apt_install openjdk-17-jdk-headless maven
}

need_fio() {
  # replab iotest measures a node's storage with fio (its tests run it too).
  apt_install fio
}

case "$purpose" in
  build) need_go ;;
  ha)    need_go; need_lab; need_postgres; need_ha ;;
  # The quickstart needs PostgreSQL alone; `make test` installs the other engines.
  demo)  need_go; need_lab; apt_install postgresql-15 ;;
  # tcpdump: the tests read the lab's packet captures with a real pcap reader.
  test)  need_go; need_lab; need_postgres; need_ha; need_mariadb; need_xrootd; need_storage; need_fio; need_java; apt_install tcpdump
         command -v chromium >/dev/null 2>&1 || apt_install chromium ;;
  bench) need_go; need_lab; need_postgres; need_mariadb; need_xrootd; need_storage; need_java; command -v iperf3 >/dev/null 2>&1 || apt_install iperf3 ;;
  *) say "unknown purpose $purpose (build|demo|test|bench|ha)"; exit 2 ;;
esac
