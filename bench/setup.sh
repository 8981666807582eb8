#!/usr/bin/env bash
# Install what the benchmarks drive from Debian's packages (idempotent; run as root):
#   wrk                 C HTTP load generator with Lua scripts (bench/ycsb.py, tuffdb-http)
#   postgresql          PostgreSQL server and pgbench (bench/ycsb.py, bench/events.py peers)
#   redis-server        Redis (bench/ycsb.py, bench/resp.py, bench/kv.py peers)
#   redis-tools         redis-cli and redis-benchmark (C load generator)
#   gcc, libc6-dev      builds bench/ycsb_gen/*.c (the YCSB driver and the null HTTP server)
# Python packages come from bench/requirements.txt (pip install -r bench/requirements.txt).
#
#   bash bench/setup.sh
set -euo pipefail

packages=(wrk postgresql redis-server redis-tools gcc libc6-dev)
binaries=(wrk pgbench redis-server redis-benchmark cc)

missing=0
for b in "${binaries[@]}"; do
    command -v "$b" >/dev/null 2>&1 || missing=1
done
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing=1
if [ "$missing" = 0 ]; then
    echo "bench/setup.sh: all benchmark tools present (${binaries[*]})"
    exit 0
fi

if [ "$(id -u)" != 0 ]; then
    sudo=sudo
else
    sudo=
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${packages[@]}"
# The benchmarks start their own servers on fresh directories; the system services only
# take memory and a core, and a system Redis would hold port 6379.
for svc in postgresql redis-server; do
    $sudo service "$svc" stop >/dev/null 2>&1 || true
done
for b in "${binaries[@]}"; do
    command -v "$b" >/dev/null 2>&1 || { echo "bench/setup.sh: $b still missing" >&2; exit 1; }
done
echo "bench/setup.sh: installed ${packages[*]}"
