#!/usr/bin/env bash
# Socket activation as systemd does it (mcpcell.socket), with systemd-socket-activate from
# the systemd package: it listens on a loopback port and, at the first connection, execs
# `mcpcell serve --http` with LISTEN_FDS=1 and LISTEN_PID set; one MCP call over HTTP
# (initialize + run_command in a cell) must go through that socket, and the server must
# not have bound one of its own. Then the refusals, each with its message: LISTEN_FDS
# values that are not one socket, a socket on another address than --http, a socket for
# a stdio server. Every state dir is in the test's temporary dir.
# Usage: socket_activation_test.sh MCPCELL_BINARY   (as root: a root server's cells)
# shellcheck disable=SC2016 # $$, $0 and $@ are the inner shell's
set -euo pipefail
binary=$1
here=$(dirname "$(realpath "$0")")
for tool in systemd-socket-activate python3 ss; do
  command -v "$tool" >/dev/null || { echo "socket_activation_test: $tool missing (packages systemd, iproute2)" >&2; exit 1; }
done
[[ $(id -u) -eq 0 ]] || { echo "socket_activation_test: needs root (a root server's cells)" >&2; exit 1; }
fail() { echo "socket_activation_test: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/mcpcell-sockact.XXXXXX)
chmod 755 "$tmp"
server=
cleanup() {
  [[ -z $server ]] || { kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
  rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

echo "== an MCP call through the socket systemd-socket-activate passes" >&2
port=$(free_port)
systemd-socket-activate -l "127.0.0.1:$port" -- \
  "$binary" serve --http "127.0.0.1:$port" --state-dir "$tmp/state" 2>"$tmp/server.log" &
server=$!
python3 "$here/http_call.py" "http://127.0.0.1:$port/mcp" "via-socket-activation" \
  "echo via-socket-activation; id -u" >"$tmp/call.txt" ||
  { cat "$tmp/server.log" >&2; fail "the MCP call through the activated socket failed"; }
# The program systemd-socket-activate exec'd is the server (same pid), and the only
# socket listening on the port is the one it was given: fd 3 of that process.
[[ $(readlink "/proc/$server/exe") == "$(realpath "$binary")" ]] || fail "pid $server is not mcpcell"
listeners=$(ss -Hltnp "sport = :$port")
[[ $(wc -l <<<"$listeners") -eq 1 && $listeners == *"pid=$server,fd=3)"* ]] ||
  fail "expected one listener on :$port, fd 3 of pid $server; ss says: $listeners"
kill -TERM "$server"
wait "$server" || fail "the server exited with status $? after SIGTERM: $(cat "$tmp/server.log")"
server=

expect_refusal() {  # expect_refusal NAME MESSAGE COMMAND...: exits 2, stderr has MESSAGE
  local name=$1 message=$2 rc=0
  shift 2
  timeout 60 "$@" </dev/null >/dev/null 2>"$tmp/$name.err" || rc=$?
  [[ $rc -eq 2 ]] || fail "$name: exit status $rc, not 2: $(cat "$tmp/$name.err")"
  grep -qF -- "$message" "$tmp/$name.err" || fail "$name: stderr lacks '$message': $(cat "$tmp/$name.err")"
  echo "  $name: $(grep -F -- "$message" "$tmp/$name.err")" >&2
}
echo "== refusals" >&2
serve=("$binary" serve --http "127.0.0.1:$(free_port)" --state-dir "$tmp/refused")
# LISTEN_PID=$$ of the shell that execs the server: the server's own pid. bash -c's first
# argument after the script is its $0, so the commands without a value pass "_" there.
for value in abc 0 2 -1; do
  expect_refusal "LISTEN_FDS=$value" "LISTEN_FDS=" \
    bash -c 'LISTEN_PID=$$ LISTEN_FDS=$0 exec "$@"' "$value" "${serve[@]}"
done
expect_refusal "LISTEN_FDS=2 says one" "mcpcell takes exactly one listening socket" \
  bash -c 'LISTEN_PID=$$ LISTEN_FDS=2 exec "$@"' _ "${serve[@]}"
expect_refusal "no LISTEN_PID" "without LISTEN_PID" env LISTEN_FDS=1 "${serve[@]}"
expect_refusal "fd 3 closed" "fd 3 is not an open descriptor" \
  bash -c 'exec 3<&-; LISTEN_PID=$$ LISTEN_FDS=1 exec "$@"' _ "${serve[@]}"
expect_refusal "fd 3 a file" "(fd 3) is a regular file, not a socket" \
  bash -c 'exec 3</etc/hostname; LISTEN_PID=$$ LISTEN_FDS=1 exec "$@"' _ "${serve[@]}"
port=$(free_port)
expect_refusal "another address" "is bound to 0.0.0.0:$port, but the server is configured for 127.0.0.1:$port" \
  python3 "$here/activate.py" "0.0.0.0:$port" "$binary" serve --http "127.0.0.1:$port" --state-dir "$tmp/addr"
expect_refusal "stdio" "but serve runs over stdio" \
  python3 "$here/activate.py" "127.0.0.1:$(free_port)" "$binary" serve --state-dir "$tmp/stdio"
echo "socket_activation_test: ok" >&2
