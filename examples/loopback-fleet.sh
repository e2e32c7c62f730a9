#!/bin/sh
# Try `edbstress fleet` on one machine: a throwaway OpenSSH server on loopback (127.0.0.1
# and 127.0.0.2 stand for two hosts), a key made for it, a two-host fleet of a short
# Performance test over ssh, then the server stopped by its PID and the key removed.
#
#   sh examples/loopback-fleet.sh [OUTPUT-DIR]
#
# Needs sshd, ssh and ssh-keygen (Debian: openssh-server, openssh-client). Run it as root
# or as the user the fleet logs in as (sshd started by a user accepts only that user).
# EDBSTRESS names the binary (default: edbstress on PATH, else ./target/release/edbstress,
# else ./target/debug/edbstress). Everything the fleet writes goes under OUTPUT-DIR
# (default: a new directory under /tmp); the sshd's key and files are deleted at the end.
set -eu

fail() { echo "loopback-fleet: $*" >&2; exit 2; }

sshd_bin=$(command -v sshd || true)
[ -n "$sshd_bin" ] || { [ -x /usr/sbin/sshd ] && sshd_bin=/usr/sbin/sshd; } || true
[ -n "$sshd_bin" ] || fail "sshd is not installed (apt-get install openssh-server)"
command -v ssh >/dev/null || fail "ssh is not installed (apt-get install openssh-client)"
command -v ssh-keygen >/dev/null || fail "ssh-keygen is not installed (apt-get install openssh-client)"

bin=${EDBSTRESS:-}
if [ -z "$bin" ]; then
    for candidate in "$(command -v edbstress || true)" ./target/release/edbstress ./target/debug/edbstress; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then bin=$candidate; break; fi
    done
fi
[ -n "$bin" ] && [ -x "$bin" ] || fail "no edbstress binary: build one (cargo build --release) or set EDBSTRESS"
# The remote side runs it by this path: make it absolute.
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

out=${1:-$(mktemp -d /tmp/edbstress-loopback-fleet.XXXXXX)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
keys=$(mktemp -d /tmp/edbstress-loopback-sshd.XXXXXX)
sshd_pid=

stop_sshd() {
    if [ -n "$sshd_pid" ]; then
        kill "$sshd_pid" 2>/dev/null || true
        wait "$sshd_pid" 2>/dev/null || true
        echo "loopback-fleet: stopped sshd (PID $sshd_pid)"
    fi
    rm -rf "$keys"
}
trap stop_sshd EXIT
trap 'exit 130' INT TERM

ssh-keygen -q -t ed25519 -N "" -f "$keys/host_key"
ssh-keygen -q -t ed25519 -N "" -f "$keys/id"
cp "$keys/id.pub" "$keys/authorized_keys"
# A free port: the kernel's choice, through a listener opened and closed at once.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 22022)
user=$(id -un)
# sshd run as root wants its privilege-separation directory.
[ "$(id -u)" -ne 0 ] || mkdir -p /run/sshd

cat > "$keys/sshd_config" <<EOF
ListenAddress 127.0.0.1:$port
ListenAddress 127.0.0.2:$port
HostKey $keys/host_key
PidFile $keys/sshd.pid
AuthorizedKeysFile $keys/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
AllowUsers $user
LogLevel ERROR
EOF
cat > "$keys/ssh_config" <<EOF
Host 127.0.0.1 127.0.0.2
  Port $port
  User $user
  IdentityFile $keys/id
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  BatchMode yes
EOF

"$sshd_bin" -D -e -f "$keys/sshd_config" 2>"$keys/sshd.log" &
sshd_pid=$!
echo "loopback-fleet: sshd (PID $sshd_pid) on 127.0.0.1 and 127.0.0.2, port $port"
tries=0
until ssh -F "$keys/ssh_config" 127.0.0.2 true 2>/dev/null; do
    tries=$((tries + 1))
    if [ "$tries" -ge 100 ] || ! kill -0 "$sshd_pid" 2>/dev/null; then
        cat "$keys/sshd.log" >&2
        fail "sshd did not accept the key on 127.0.0.2:$port"
    fi
    sleep 0.1
done

# Two "hosts", each with its own directories; a short test on small databases (a try,
# not a measurement: the page cache may hold them).
host() {
    echo "$1,name=$2,db-path=$out/$2/db,log-path=$out/$2/logs,results-dir=$out/$2/results"
}
status=0
"$bin" fleet run \
    --host "$(host 127.0.0.1 mbx1)" \
    --host "$(host 127.0.0.2 mbx2)" \
    --ssh-config "$keys/ssh_config" \
    --remote-edbstress "$bin" \
    --lead-time 15s \
    --max-clock-offset 30s \
    --mailboxes 200 \
    --output "$out/fleet" \
    -- --iops-per-mailbox 0.25 --databases 1 --database-size 64MiB \
       --cache-max 16MiB --duration 10s --sample-interval 2s \
    || status=$?
echo "loopback-fleet: fleet run ended with exit code $status; its aggregate: $out/fleet"
exit "$status"
