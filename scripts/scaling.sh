#!/usr/bin/env bash
# How throughput scales with client threads, for every engine in the build,
# in one command: `keel bench oltp --workload read_write` with
# flush_log_at_trx_commit=2 (no sync at commit: the CPU and the engine's
# locks and latches are measured, not the disk), once per thread count
# (`--vary threads=...`, each run on its own copy of the same prepared
# tables), on keel, and on sqlite, redb, lmdb and rocksdb where `keel bench
# oltp --help` says they are in this build. The data lives under /dev/shm
# (memory) when it exists, and each engine's cache (Keel's buffer pool,
# SQLite's page cache, redb's cache, RocksDB's block cache; LMDB has none)
# is --pool, large enough to hold it: nothing waits for a device.
#
# Defaults: --threads-list 1,4,16,32,64,256 --tables 16 --table-size 50000
# (about 370 MB in Keel's files) --time 12 (seconds per run) --runs 1
# --pool 2GiB --engines "keel sqlite redb lmdb rocksdb" (commas work too)
# --out scaling-results --work /dev/shm/keel-scaling-work (or scaling-work
# here without /dev/shm). The work directory needs twice the data's size
# (the prepared tables and one run's copy). With --runs N each repetition
# runs every engine once, one after the other, and the figures are medians.
#
# Usage: scripts/scaling.sh [--threads-list 1,4,16,...] [--tables T] [--table-size N]
#                           [--time S] [--runs N] [--pool SIZE] [--engines "keel ..."]
#                           [--out DIR] [--work DIR]
# Writes DIR/ENGINE-N.json, DIR/ENGINE-N.log and DIR/ENGINE-N/ (that
# invocation's report) for every engine and repetition; DIR/report/ (`keel
# report --repeats` over them all: every run's time series, the summary and
# each configuration's median); DIR/scaling.html (median tps against
# threads, one line per engine, on a log2 thread axis, the lowest and
# highest of the repetitions as whiskers) and DIR/scaling.txt, the table
# printed at the end:
#   - median tps, engine x threads;
#   - tps(16)/tps(1): how far 16 threads multiply one thread's throughput
#     (the goal: >= 14, i.e. near-linear up to 16 threads on a machine with
#     at least 16 cores);
#   - tps(K)/best for K = 32, 64, 256, best being the engine's highest
#     median tps at any thread count: how much of its peak it keeps with
#     more threads than that (the goal: >= 0.95, no collapse under
#     oversubscription).
# A ratio reads "-" when its thread counts are not in the list. The ratios
# mean little on a machine with fewer cores than threads.
set -euo pipefail

TIME=12
RUNS=1
THREADS_LIST=1,4,16,32,64,256
TABLES=16
TABLE_SIZE=50000
POOL=2GiB
ENGINES="keel sqlite redb lmdb rocksdb"
OUT=scaling-results
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  WORK=/dev/shm/keel-scaling-work
else
  WORK=scaling-work
fi
EXTRA_FLAGS=(--threads-list=THREADS_LIST --tables=TABLES --table-size=TABLE_SIZE
  --pool=POOL --engines=ENGINES)
HELP_LINES=2,40p
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/common.sh"
parse_args "$@"

THREADS_LIST=${THREADS_LIST// /}
if ! [[ $THREADS_LIST =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]]; then
  echo "scaling.sh: --threads-list takes thread counts separated by commas, e.g. 1,4,16" >&2
  exit 2
fi
for n in "$TABLES" "$TABLE_SIZE" "$RUNS"; do
  if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
    echo "scaling.sh: --tables, --table-size and --runs take a positive number, not '$n'" >&2
    exit 2
  fi
done
ENGINES=${ENGINES//,/ }

COMMON=(--workload read_write --tables "$TABLES" --table-size "$TABLE_SIZE"
  --set flush_log_at_trx_commit=2 --time "$TIME" --vary "threads=$THREADS_LIST")
echo "== $TABLES tables x $TABLE_SIZE rows, threads $THREADS_LIST, $TIME s a run," \
  "$RUNS repetition(s); data in $WORK, results in $OUT"
files=()
for i in $(seq 1 "$RUNS"); do
  for engine in $ENGINES; do
    in_build "$engine" || continue
    # LMDB has no cache of its own (it reads through the OS page cache)
    # and refuses a cache size.
    cache=(--set "buffer_pool_size=$POOL")
    if [ "$engine" = lmdb ]; then cache=(); fi
    name=$engine-$i
    echo "== $name"
    rm -rf "${WORK:?}/$name" "$WORK/$name"-run*
    if ! "$KEEL" bench oltp --engine "$engine" "${COMMON[@]}" "${cache[@]}" \
      --datadir "$WORK/$name" --json "$OUT/$name.json" --report "$OUT/$name" \
      > "$OUT/$name.log" 2>&1; then
      echo "== $name failed; the end of $OUT/$name.log:" >&2
      tail -n 20 "$OUT/$name.log" >&2
      rm -rf "${WORK:?}/$name" "$WORK/$name"-run*
      exit 1
    fi
    grep -E "^threads=[0-9]+: " "$OUT/$name.log" || true
    rm -rf "${WORK:?}/$name" "$WORK/$name"-run*
    files+=("$OUT/$name.json")
  done
done
if [ ${#files[@]} -eq 0 ]; then
  echo "scaling.sh: no engine of '$ENGINES' is in this build" >&2
  exit 1
fi
merge_reports "scaling table or chart" "${files[@]}"
# The table and the chart: Python 3's standard library only.
python3 - "$OUT" "${files[@]}" << 'PY'
import html
import json
import math
import os
import statistics
import sys

out, files = sys.argv[1], sys.argv[2:]
# engine -> threads -> [tps_avg of each repetition]
tps = {}
setup = None
for f in files:
    with open(f) as fh:
        report = json.load(fh)
    for run in report["runs"]:
        w = run["workload"]
        setup = setup or w
        tps.setdefault(run.get("engine", "keel"), {}).setdefault(
            int(w["threads"]), []
        ).append(float(run["summary"]["tps_avg"]))
engines = list(tps)
threads = sorted({t for by in tps.values() for t in by})
med = {e: {t: statistics.median(v) for t, v in tps[e].items()} for e in engines}


def ratio(e, k):
    m = med[e]
    if k == "16/1":
        return m[16] / m[1] if 16 in m and 1 in m and m[1] > 0 else None
    if k not in m:
        return None
    best = max(m.values())
    return m[k] / best if best > 0 else None


RATIOS = [("16/1", "tps(16)/tps(1)", 14.0)] + [
    (k, f"tps({k})/best", 0.95) for k in (32, 64, 256)
]


def fmt_ratio(r, goal):
    if r is None:
        return "-"
    return f"{r:.2f}" + ("" if r >= goal else " (below)")


def table(rows):
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            (c.ljust(w) if i == 0 else c.rjust(w)) for i, (c, w) in enumerate(zip(r, widths))
        ).rstrip()
        for r in rows
    )


reps = max(len(v) for by in tps.values() for v in by.values())
head = (
    f"median tps over {reps} repetition(s): {setup['workload']}, {setup['tables']} tables x "
    f"{setup['table_size']} rows, {setup['time_s']:g} s a run, flush_log_at_trx_commit=2"
)
tps_rows = [["engine \\ threads"] + [str(t) for t in threads]]
for e in engines:
    tps_rows.append([e] + [f"{med[e][t]:.0f}" if t in med[e] else "-" for t in threads])
ratio_rows = [["engine"] + [label for _, label, _ in RATIOS] + ["best (threads)"]]
for e in engines:
    m = med[e]
    top = max(m, key=m.get)
    ratio_rows.append(
        [e]
        + [fmt_ratio(ratio(e, k), goal) for k, _, goal in RATIOS]
        + [f"{m[top]:.0f} ({top})"]
    )
notes = (
    "tps(16)/tps(1): the goal is >= 14 (near-linear to 16 threads).\n"
    "tps(K)/best: the share of the engine's highest median tps kept at K threads; "
    "the goal is >= 0.95.\n"
    "-: a thread count not in the list; (below): under the goal."
)
text = f"{head}\n{table(tps_rows)}\n\nscaling ratios:\n{table(ratio_rows)}\n{notes}\n"
with open(os.path.join(out, "scaling.txt"), "w") as fh:
    fh.write(text)
print(text, end="")

# The chart: inline SVG, x = threads on a log2 scale, y = median tps.
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"]
W, H, L, R, T, B = 900, 440, 80, 150, 40, 50
pw, ph = W - L - R, H - T - B
lo, hi = math.log2(threads[0]), math.log2(threads[-1])


def x_at(t):
    return L + (pw / 2 if hi == lo else pw * (math.log2(t) - lo) / (hi - lo))


top = max((max(v) for by in tps.values() for v in by.values()), default=1.0) or 1.0
step = 10 ** math.floor(math.log10(top))
y_max = next(m * step for m in (1, 2, 2.5, 5, 10) if m * step >= top)


def y_at(v):
    return T + ph * (1 - v / y_max)


svg = [
    f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
    f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
    f'<text x="{L + pw / 2}" y="20" text-anchor="middle" font-size="15">'
    f"transactions/s against client threads</text>",
]
for i in range(6):
    v = y_max * i / 5
    y = y_at(v)
    svg.append(
        f'<line x1="{L}" x2="{L + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
        f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{v:,.0f}</text>'
    )
for t in threads:
    x = x_at(t)
    svg.append(
        f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{T}" y2="{T + ph}" stroke="#eee"/>'
        f'<text x="{x:.1f}" y="{T + ph + 18}" text-anchor="middle">{t}</text>'
    )
svg.append(
    f'<text x="{L + pw / 2}" y="{H - 8}" text-anchor="middle">client threads (log scale)</text>'
    f'<text transform="translate(18 {T + ph / 2}) rotate(-90)" text-anchor="middle">'
    f"median transactions/s</text>"
)
for n, e in enumerate(engines):
    c = PALETTE[n % len(PALETTE)]
    pts = [(x_at(t), y_at(med[e][t])) for t in threads if t in med[e]]
    svg.append(f"<g><title>{html.escape(e)}</title>")
    svg.append(
        f'<polyline fill="none" stroke="{c}" stroke-width="2" points="'
        + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        + '"/>'
    )
    for t in threads:
        if t not in med[e]:
            continue
        x, v = x_at(t), tps[e][t]
        if len(v) > 1:
            svg.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y_at(min(v)):.1f}" '
                f'y2="{y_at(max(v)):.1f}" stroke="{c}"/>'
            )
        svg.append(
            f'<circle cx="{x:.1f}" cy="{y_at(med[e][t]):.1f}" r="3.5" fill="{c}">'
            f"<title>{html.escape(e)}, {t} threads: {med[e][t]:,.0f} tps</title></circle>"
        )
    svg.append("</g>")
    ly = T + 10 + 20 * n
    svg.append(
        f'<line x1="{L + pw + 15}" x2="{L + pw + 40}" y1="{ly}" y2="{ly}" stroke="{c}" '
        f'stroke-width="2"/><text x="{L + pw + 46}" y="{ly + 4}">{html.escape(e)}</text>'
    )
svg.append("</svg>")


def html_table(rows):
    head, *body = rows
    th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    trs = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body
    )
    return f"<table><tr>{th}</tr>{trs}</table>"


page = f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>keel scaling</title><style>
body{{font-family:sans-serif;margin:2em;max-width:960px}}
table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}
td:first-child,th:first-child{{text-align:left}}
</style></head><body>
<h1>Scaling with client threads</h1>
<p>{html.escape(head)}. The whiskers span the lowest and highest repetition.
Every run's time series, summary and settings:
<a href="report/index.html">report/index.html</a>.</p>
{"".join(svg)}
<h2>Median tps</h2>{html_table(tps_rows)}
<h2>Scaling ratios</h2>{html_table(ratio_rows)}<p>{html.escape(notes).replace(chr(10), "<br>")}</p>
</body></html>
"""
with open(os.path.join(out, "scaling.html"), "w") as fh:
    fh.write(page)
print(f"chart: {os.path.join(out, 'scaling.html')}")
print(f"report: {os.path.join(out, 'report', 'index.html')}")
PY
