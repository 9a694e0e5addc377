#!/usr/bin/env bash
# Make sure a Docker engine answers. If one already does, touch nothing.
# Otherwise (root on Debian only): install docker.io + mmdebstrap, start dockerd in
# the background, and wait until `docker info` answers. The PID of the dockerd we
# started is written to .state/dockerd.pid so only that process is ever stopped.
set -euo pipefail

STATE_DIR="${BAKEOFF_STATE_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.state}"
WAIT_S="${BAKEOFF_ENGINE_WAIT_S:-60}"

engine_answers() { docker info >/dev/null 2>&1; }

# What is missing: the engine (unless one answers: `need_pkgs tools`), mmdebstrap for the
# base image, and ssh for DOCKER_HOST=ssh:// (the SDK and the CLI shell out to it).
need_pkgs() {
  local missing=()
  [ "${1:-}" = tools ] || command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
  command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
  printf '%s\n' "${missing[@]:-}"
}

install_pkgs() {
  local pkgs
  pkgs=$(need_pkgs "${1:-}" | xargs)
  [ -z "$pkgs" ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-engine: missing $pkgs and cannot install them (need root on Debian)." >&2
    echo "  fix: install docker.io and mmdebstrap, or point DOCKER_HOST at a running engine" >&2
    exit 1
  fi
  echo "ensure-engine: installing $pkgs"
  # apt-get update is bounded: a stuck mirror must not hang setup forever.
  timeout 300 apt-get update -qq
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
}

# mmdebstrap (the base image) and ssh are needed even when an engine answers.
if engine_answers; then
  echo "ensure-engine: engine answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null)); leaving it alone"
  install_pkgs tools
  exit 0
fi

install_pkgs
# docker.io's client lives in /usr/bin; make sure some client exists.
command -v docker >/dev/null 2>&1 || { echo "ensure-engine: no docker client after install" >&2; exit 1; }

mkdir -p "$STATE_DIR"
echo "ensure-engine: starting dockerd in the background (log: $STATE_DIR/dockerd.log)"
# Address pools for many small networks: every arm, sample and stack gets an internal
# network of its own, and dockerd's defaults (/16s and /20s) run out at about 31 at once
# (three test workers reach that). 10.213.0.0/16 in /24s: 256 networks; dockerd skips any
# that overlaps a route of this machine. Unless the machine's daemon.json sets its own
# (a flag beside it would stop dockerd from starting).
pools=(--default-address-pool base=10.213.0.0/16,size=24)
if grep -qs default-address-pools /etc/docker/daemon.json; then pools=(); fi
# setsid: dockerd must outlive this make invocation, and not get our terminal's signals.
setsid dockerd "${pools[@]}" >"$STATE_DIR/dockerd.log" 2>&1 < /dev/null &
echo $! > "$STATE_DIR/dockerd.pid"

for _ in $(seq 1 "$WAIT_S"); do
  if engine_answers; then
    echo "ensure-engine: engine ready ($(docker version --format '{{.Server.Version}}'))"
    exit 0
  fi
  if ! kill -0 "$(cat "$STATE_DIR/dockerd.pid")" 2>/dev/null; then
    echo "ensure-engine: dockerd exited; last lines of its log:" >&2
    tail -n 20 "$STATE_DIR/dockerd.log" >&2
    exit 1
  fi
  sleep 1
done
echo "ensure-engine: dockerd did not answer within ${WAIT_S}s; last lines of its log:" >&2
tail -n 20 "$STATE_DIR/dockerd.log" >&2
exit 1
