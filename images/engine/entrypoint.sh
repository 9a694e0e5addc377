#!/bin/sh
# dockerd on tcp 2375 (no TLS) and its local socket (what `docker system dial-stdio`
# reaches when a client comes in over ssh: DOCKER_HOST=ssh://), overlay2 on the tmpfs at /var/lib/docker, and a cgroup
# parent of its own: a child of this container's own cgroup, so everything the inner
# engine runs stays inside this container's limits and goes when it goes (the host
# engine's runc removes a container's cgroup with its children). Extra arguments are
# dockerd's.
#
# Supervised, so a test can stop and start the engine without losing its store (the
# tmpfs, all its images, lives as long as this container): dockerd that exits is run
# again, unless the hold file exists, in which case it waits until the file is gone
# (tests/integration/remote_engine.py: `stop_dockerd` makes the file and SIGTERMs
# dockerd, `start_dockerd` removes it). SIGTERM or SIGINT to the container (tini, PID 1,
# passes it here) stops dockerd and ends the container.
set -eu
own=$(sed -n 's/^[0-9]*:memory:\(.*\)$/\1/p' /proc/self/cgroup)
if [ -z "$own" ] || [ "$own" = / ]; then
  echo "bakeoff-engine: no cgroup of its own (run it with --cgroupns host and" \
       "/sys/fs/cgroup mounted read-write)" >&2
  exit 1
fi
HOLD=/run/bakeoff-engine.hold
RESPAWN_S=1  # between a dockerd that exited by itself and the next (no busy loop)
stopping=""
pid=""
stop() {
  stopping=1
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; fi
}
trap stop TERM INT
while [ -z "$stopping" ]; do
  rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
  dockerd --host tcp://0.0.0.0:2375 --host unix:///var/run/docker.sock --tls=false \
    --storage-driver overlay2 --cgroup-parent "$own/engine" "$@" &
  pid=$!
  echo "bakeoff-engine: dockerd started (pid $pid)" >&2
  # `wait` returns early when a trapped signal arrives: wait again until dockerd is gone.
  while kill -0 "$pid" 2>/dev/null; do wait "$pid" || true; done
  echo "bakeoff-engine: dockerd (pid $pid) exited" >&2
  pid=""
  if [ -e "$HOLD" ]; then
    echo "bakeoff-engine: held until $HOLD is removed" >&2
    while [ -z "$stopping" ] && [ -e "$HOLD" ]; do sleep 0.2; done
  elif [ -z "$stopping" ]; then
    sleep "$RESPAWN_S"
  fi
done
