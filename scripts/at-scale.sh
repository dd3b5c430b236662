#!/usr/bin/env bash
# Seed 4 ("More on Checkpoints in InnoDB MySQL 8", Percona) at about 30 x
# the `waves-80` preset's scale, under both flushing policies, repeated,
# with the figures that say whether `steady` holds the checkpoint age just
# under the limit where the device is the bottleneck: one command for a
# machine with 16 cores or more (on fewer, the CPU is the bottleneck and
# the figures say little about flushing).
#
# Each repetition is one `keel bench oltp --preset waves-80 ... --vary
# flush_policy=classic,steady` (the `sata-ssd` device model, both runs on
# copies of the same prepared tables; the tables are prepared once, by the
# first repetition, and reused). Then `keel report --repeats` over them all,
# and a table of each policy's medians over the repetitions:
#   - tps avg, and the lowest second as a share of the run's median;
#   - pages written per transaction;
#   - the checkpoint age's median over the run after its first 10 s, as a
#     share of the free-check limit (where writers stop: 0.92 of the log);
#   - free-check (sync-flush) waits, the longest writer pause (`steady`'s
#     pacing) and the longest transaction.
#
# Defaults: --tables 16 --table-size 600000 (2.9 GB in Keel's files with
# the log, prepared in about 20 s on 2 cores; the work directory needs
# twice that) --threads 64 --pool 6GiB --instances 8 --log 256MiB (per
# file, two files) --time 60 (seconds per run) --runs 3 --out
# at-scale-results --work /dev/shm/keel-at-scale-work (or at-scale-work
# here without /dev/shm). With the defaults: 6 runs of 60 s, plus
# preparing the tables once and copying them for every run.
# Smaller: --tables 4 --table-size 50000 --threads 8 --pool 512MiB
# --instances 2 --log 16MiB --time 20.
#
# Usage: scripts/at-scale.sh [--tables T] [--table-size N] [--threads N]
#                            [--pool SIZE] [--instances N] [--log SIZE]
#                            [--time S] [--runs N] [--out DIR] [--work DIR]
# Writes DIR/seed4-N.json, DIR/seed4-N.log and DIR/seed4-N/ (that
# repetition's report) for every repetition; DIR/report/ (`keel report
# --repeats`: every run's time series, the summary and each
# configuration's median) and DIR/at-scale.txt, the table printed at the
# end. KEEL=path/to/keel uses that binary instead of building one.
set -euo pipefail

TIME=60
RUNS=3
TABLES=16
TABLE_SIZE=600000
THREADS=64
POOL=6GiB
INSTANCES=8
LOG=256MiB
OUT=at-scale-results
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  WORK=/dev/shm/keel-at-scale-work
else
  WORK=at-scale-work
fi
EXTRA_FLAGS=(--tables=TABLES --table-size=TABLE_SIZE --threads=THREADS --pool=POOL
  --instances=INSTANCES --log=LOG)
HELP_LINES=2,38p
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/common.sh"
parse_args "$@"

for n in "$TABLES" "$TABLE_SIZE" "$THREADS" "$INSTANCES" "$RUNS" "$TIME"; do
  if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
    echo "at-scale.sh: --tables, --table-size, --threads, --instances, --runs and --time" \
      "take a positive number, not '$n'" >&2
    exit 2
  fi
done

ARGS=(--preset waves-80 --tables "$TABLES" --table-size "$TABLE_SIZE" --threads "$THREADS"
  --set "buffer_pool_size=$POOL" --set "buffer_pool_instances=$INSTANCES"
  --set "log_file_size=$LOG" --time "$TIME" --vary flush_policy=classic,steady)
echo "== seed 4: $TABLES tables x $TABLE_SIZE rows, $THREADS threads, pool $POOL in" \
  "$INSTANCES instances, 2 x $LOG of log, $TIME s a run, $RUNS repetition(s);" \
  "data in $WORK, results in $OUT"
rm -rf "${WORK:?}/data" "$WORK"/data-run*
files=()
for i in $(seq 1 "$RUNS"); do
  name=seed4-$i
  echo "== $name ($(date +%T))"
  if ! "$KEEL" bench oltp "${ARGS[@]}" --datadir "$WORK/data" --reuse-data \
    --json "$OUT/$name.json" --report "$OUT/$name" > "$OUT/$name.log" 2>&1; then
    echo "== $name failed; the end of $OUT/$name.log:" >&2
    tail -n 20 "$OUT/$name.log" >&2
    rm -rf "${WORK:?}/data" "$WORK"/data-run*
    exit 1
  fi
  grep -E "^flush_policy=[a-z]+: " "$OUT/$name.log" || true
  files+=("$OUT/$name.json")
done
rm -rf "${WORK:?}/data" "$WORK"/data-run*
merge_reports "table" "${files[@]}"
# The table: Python 3's standard library only.
python3 - "$OUT" "${files[@]}" << 'PY'
import json
import os
import statistics
import sys

out, files = sys.argv[1], sys.argv[2:]


def free_check_limit(cap):
    # engine::free_check_limit: the writers' capacity less 5 %.
    writer_cap = cap - min(max(cap // 32, 64 << 10), cap // 4)
    return writer_cap - writer_cap // 20


# policy -> list of per-run figures
runs = {}
for f in files:
    with open(f) as fh:
        report = json.load(fh)
    for run in report["runs"]:
        policy = run["options"].get("flush_policy", "?")
        s, iv = run["summary"], run["intervals"]
        late = [i for i in iv if i["t_s"] > 10] or iv
        tps = [i["tps"] for i in iv]
        med = statistics.median(tps) if tps else 0.0
        runs.setdefault(policy, []).append(
            {
                "tps": s["tps_avg"],
                "low": min(tps) / med if med > 0 else 0.0,
                "pages": s["pages_written_per_txn"],
                "age": statistics.median(
                    i["checkpoint_age"] / free_check_limit(i["log_capacity"]) for i in late
                ),
                "waits": s["sync_flush_waits"],
                "pause": max((i.get("pause_max_ms") or 0.0) for i in iv),
                "max": s["latency_ms"]["max"],
            }
        )

cols = [
    ("tps avg", "tps", "{:.0f}"),
    ("lowest s / median", "low", "{:.2f}"),
    ("pages/txn", "pages", "{:.3f}"),
    ("median age / free-check limit", "age", "{:.3f}"),
    ("free-check waits", "waits", "{:.0f}"),
    ("longest pause ms", "pause", "{:.0f}"),
    ("max latency ms", "max", "{:.0f}"),
]
rows = [["policy", "runs"] + [c[0] for c in cols]]
for policy, rs in runs.items():
    row = [policy, str(len(rs))]
    for _, key, fmt in cols:
        vals = [r[key] for r in rs]
        cell = fmt.format(statistics.median(vals))
        if len(vals) > 1:
            cell += f" ({fmt.format(min(vals))}-{fmt.format(max(vals))})"
        row.append(cell)
    rows.append(row)
widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
table = "\n".join(
    "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    for r in rows
)
text = (
    "medians over the repetitions (lowest-highest):\n"
    + table
    + "\n\nWhere the device is the bottleneck, steady should hold the median age at 0.85"
    " of the free-check limit or more, with no free-check wait, no second under half the"
    " median (lowest s / median >= 0.50) and no pause over 100 ms.\n"
)
with open(os.path.join(out, "at-scale.txt"), "w") as fh:
    fh.write(text)
print(text, end="")
print(f"report: {os.path.join(out, 'report', 'index.html')}")
PY
