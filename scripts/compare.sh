#!/usr/bin/env bash
# The published comparison of Keel with real InnoDB, in one command:
# InnoDB (MariaDB + sysbench), Keel `classic` and Keel `steady` on this
# machine's disk throttled to 300 and 1,000 write IOPS and unthrottled:
# oltp_read_write, 8 tables x 200,000 rows, 8 threads, 1 GiB buffer pool,
# 64 MiB of redo (2 x 32 MiB), flush_log_at_trx_commit=2.
#
# Each repetition runs InnoDB, classic and steady one after the other, so
# that a drift of the machine touches all three. Keel's tables are prepared
# once and copied for each run; each Keel run reads them into the pool
# first (--prewarm), as InnoDB's pool holds them after sysbench's prepare.
# The page cache is dropped before each run where this is allowed.
#
# Throttling needs root and a cgroup I/O controller (see `keel bench oltp
# --help`, --throttle-write-iops); InnoDB needs mariadb-server,
# mariadb-client and sysbench (`keel bench innodb` says which are missing).
#
# Usage: scripts/compare.sh [--time S] [--runs N] [--limits "300 1000 none"]
#                           [--out DIR] [--work DIR]
# Writes DIR/ENGINE-LIMIT-N.json for every run, DIR/report-LIMIT/ (each
# limit's runs) and DIR/report/ (all runs) with `keel report`, whose
# --repeats table gives each configuration's median.
set -euo pipefail

TIME=120
RUNS=1
LIMITS="300 1000 none"
OUT=compare-results
WORK=compare-work
EXTRA_FLAG=--limits
EXTRA_VAR=LIMITS
HELP_LINES=2,22p
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/common.sh"
parse_args "$@"

COMMON=(--workload read_write --tables 8 --table-size 200000 --threads 8
  --set buffer_pool_size=1GiB --set log_file_size=32MiB --set log_files_in_group=2
  --set flush_log_at_trx_commit=2)

drop_caches() {
  sync
  if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; fi
}

if [ ! -d "$WORK/keel-base" ]; then
  echo "== preparing Keel's tables once in $WORK/keel-base"
  "$KEEL" bench oltp "${COMMON[@]}" --time 1 --datadir "$WORK/keel-base" \
    --report "$WORK/prepare-report" > "$WORK/prepare.log"
fi

all=()
for limit in $LIMITS; do
  throttle=()
  if [ "$limit" != none ]; then throttle=(--throttle-write-iops "$limit"); fi
  for i in $(seq 1 "$RUNS"); do
    name=innodb-$limit-$i
    echo "== $name"
    rm -rf "$WORK/innodb"
    drop_caches
    "$KEEL" bench innodb "${COMMON[@]}" --time "$TIME" "${throttle[@]}" --datadir "$WORK/innodb" \
      --json "$OUT/$name.json" --report "$OUT/$name" > "$OUT/$name.log"
    tail -n 3 "$OUT/$name.log" | head -n 2
    for policy in classic steady; do
      name=$policy-$limit-$i
      echo "== $name"
      rm -rf "$WORK/$policy"
      cp -a "$WORK/keel-base" "$WORK/$policy"
      drop_caches
      "$KEEL" bench oltp "${COMMON[@]}" --time "$TIME" "${throttle[@]}" --prewarm --reuse-data \
        --datadir "$WORK/$policy" --set flush_policy=$policy \
        --json "$OUT/$name.json" --report "$OUT/$name" > "$OUT/$name.log"
      grep -E "^transactions|tps" "$OUT/$name.log" | tail -n 1 || true
      rm -rf "$WORK/$policy"
    done
  done
  files=()
  for i in $(seq 1 "$RUNS"); do
    files+=("$OUT/innodb-$limit-$i.json" "$OUT/classic-$limit-$i.json" "$OUT/steady-$limit-$i.json")
  done
  "$KEEL" report --repeats "${files[@]}" --out "$OUT/report-$limit" > "$OUT/report-$limit.txt"
  cat "$OUT/report-$limit.txt"
  all+=("${files[@]}")
done
"$KEEL" report --repeats "${all[@]}" --out "$OUT/report" > "$OUT/report.txt"
