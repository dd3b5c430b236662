#!/usr/bin/env bash
# The published comparison of Keel with the embedded engines users would
# pick instead, in one command: keel, sqlite, redb, lmdb and (when the
# binary was built with `--features rocksdb`) rocksdb run the identical
# oltp_read_write transactions, rows and threads (`keel bench oltp
# --engine E`), in memory (the cache 4x Keel's data) and out of memory (the
# cache a quarter of it).
#
# 4 tables x 50,000 rows (about 92 MB in Keel's files), 8 threads,
# flush_log_at_trx_commit=1 (every commit durable when it returns). Each
# repetition runs every engine once, one after the other. LMDB has no cache
# of its own (it reads through the OS page cache), so it runs once per
# repetition, with no cache size. The other engines but Keel also read
# through the OS page cache (Keel uses O_DIRECT): "out of memory" limits
# their own cache, not the OS's (see docs/engines.md).
#
# Usage: scripts/compare-embedded.sh [--time S] [--runs N] [--engines "keel sqlite ..."]
#                                    [--out DIR] [--work DIR]
# Writes DIR/ENGINE-SIZE-N.json for every run and DIR/report/ with `keel
# report --repeats` (each configuration's medians).
set -euo pipefail

TIME=30
RUNS=1
ENGINES="keel sqlite redb lmdb rocksdb"
OUT=compare-embedded-results
WORK=compare-embedded-work
EXTRA_FLAG=--engines
EXTRA_VAR=ENGINES
HELP_LINES=2,20p
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/common.sh"
parse_args "$@"

COMMON=(--workload read_write --tables 4 --table-size 50000 --threads 8
  --set flush_log_at_trx_commit=1 --time "$TIME")
files=()
for i in $(seq 1 "$RUNS"); do
  for engine in $ENGINES; do
    in_build "$engine" || continue
    for size in in-memory out-of-memory; do
      cache=()
      case $size in
        in-memory) cache=(--set buffer_pool_size=384MiB) ;;
        out-of-memory) cache=(--set buffer_pool_size=24MiB) ;;
      esac
      if [ "$engine" = lmdb ]; then
        [ $size = in-memory ] || continue
        cache=()
        size=os-cache
      fi
      name=$engine-$size-$i
      echo "== $name"
      rm -rf "$WORK/$name"
      "$KEEL" bench oltp --engine "$engine" "${COMMON[@]}" "${cache[@]}" \
        --datadir "$WORK/$name" --json "$OUT/$name.json" --report "$OUT/$name" \
        > "$OUT/$name.log" 2>&1
      grep -E "^tps per interval" "$OUT/$name.log" | tail -n 1 || true
      rm -rf "$WORK/$name"
      files+=("$OUT/$name.json")
    done
  done
done
"$KEEL" report --repeats "${files[@]}" --out "$OUT/report" > "$OUT/report.txt"
cat "$OUT/report.txt"
