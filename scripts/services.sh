#!/usr/bin/env bash
# Throwaway servers for the tests: PostgreSQL and Redis on free loopback
# ports, data in a temp dir, nothing kept. Installs them from Debian's
# packages when missing (needs root; otherwise names the package).
#
#   eval "$(scripts/services.sh start)"    # exports SWITCHYARD_TEST_POSTGRES_URL,
#                                          # SWITCHYARD_TEST_REDIS_URL,
#                                          # SWITCHYARD_TEST_REDIS_SERVER,
#                                          # SWITCHYARD_TEST_SERVICES_DIR
#   scripts/services.sh stop "$SWITCHYARD_TEST_SERVICES_DIR"
set -euo pipefail

log() { echo "services: $*" >&2; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Installs Debian packages when a binary is missing.
need() {
  local binary=$1 package=$2
  if command -v "$binary" >/dev/null 2>&1; then return; fi
  if [ "$(id -u)" != 0 ]; then
    log "$binary is missing: install the Debian package $package (apt-get install -y $package)"
    exit 1
  fi
  log "installing $package"
  if [ ! -e /tmp/.switchyard-apt-updated ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 && touch /tmp/.switchyard-apt-updated
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >&2
}

pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$dir" ]; then
    need initdb postgresql
    dir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  fi
  echo "$dir"
}

# Runs a PostgreSQL tool as the `postgres` user when we are root (initdb
# refuses root), else as ourselves.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  local dir bin port
  # Real TLS clients the data-listener tests drive.
  need curl curl
  need openssl openssl
  dir=$(mktemp -d /tmp/switchyard-services.XXXXXX)
  chmod 755 "$dir"
  bin=$(pg_bin)
  port=$(free_port)
  mkdir -p "$dir/pg"
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir/pg"; fi
  as_pg "$bin/initdb" -D "$dir/pg/data" -A trust -U postgres >"$dir/pg/initdb.log" 2>&1 \
    || { cat "$dir/pg/initdb.log" >&2; exit 1; }
  # fsync off: throwaway data, and the suite writes a lot.
  as_pg "$bin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/server.log" -w \
    -o "-p $port -k $dir/pg -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=400" start >/dev/null \
    || { cat "$dir/pg/server.log" >&2; exit 1; }
  log "PostgreSQL on 127.0.0.1:$port (data in $dir/pg)"
  need redis-server redis-server
  local redis_port
  redis_port=$(free_port)
  mkdir -p "$dir/redis"
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir/redis" \
    --daemonize yes --pidfile "$dir/redis/redis.pid" --logfile "$dir/redis/redis.log" >&2
  for _ in $(seq 50); do
    redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  log "Redis on 127.0.0.1:$redis_port"
  echo "export SWITCHYARD_TEST_REDIS_URL=redis://127.0.0.1:$redis_port"
  echo "export SWITCHYARD_TEST_REDIS_SERVER=$(command -v redis-server)"
  echo "export SWITCHYARD_TEST_SERVICES_DIR=$dir"
  echo "export SWITCHYARD_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:$port/postgres"
  echo "export SWITCHYARD_TEST_PG_BIN=$bin"
}

stop() {
  local dir=${1:?usage: services.sh stop DIR}
  [ -d "$dir" ] || return 0
  if [ -f "$dir/redis/redis.pid" ]; then
    kill "$(cat "$dir/redis/redis.pid")" 2>/dev/null || true
  fi
  if [ -d "$dir/pg/data" ]; then
    as_pg "$(pg_bin)/pg_ctl" -D "$dir/pg/data" -m immediate stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  *) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
esac
