#!/bin/sh
# Initialise PGDATA on first start from POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB,
# then run the server as the postgres user. Password logins over TCP are accepted only
# once init is complete (the server that listens on TCP starts after it).
set -eu
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
if [ -z "${POSTGRES_PASSWORD:-}" ]; then
  echo "bakeoff-postgres: POSTGRES_PASSWORD must be set" >&2
  exit 1
fi

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec gosu postgres "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb -D "$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    quoted=$(printf '%s' "$POSTGRES_DB" | sed 's/"/""/g')
    echo "CREATE DATABASE \"$quoted\" OWNER \"$(printf '%s' "$POSTGRES_USER" | sed 's/"/""/g')\"" \
      | postgres --single -jE -D "$PGDATA" postgres >/dev/null
  fi
fi

if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -D "$PGDATA" "$@"
fi
exec "$@"
