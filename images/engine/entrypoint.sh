#!/bin/sh
# dockerd on tcp 2375 (no TLS) and its local socket (what `docker system dial-stdio`
# reaches when a client comes in over ssh: DOCKER_HOST=ssh://), overlay2 on the tmpfs at /var/lib/docker, and a cgroup
# parent of its own: a child of this container's own cgroup, so everything the inner
# engine runs stays inside this container's limits and goes when it goes (the host
# engine's runc removes a container's cgroup with its children). Extra arguments are
# dockerd's.
set -eu
own=$(sed -n 's/^[0-9]*:memory:\(.*\)$/\1/p' /proc/self/cgroup)
if [ -z "$own" ] || [ "$own" = / ]; then
  echo "bakeoff-engine: no cgroup of its own (run it with --cgroupns host and" \
       "/sys/fs/cgroup mounted read-write)" >&2
  exit 1
fi
rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
exec dockerd --host tcp://0.0.0.0:2375 --host unix:///var/run/docker.sock --tls=false --storage-driver overlay2 \
  --cgroup-parent "$own/engine" "$@"
