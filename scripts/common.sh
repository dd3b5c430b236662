# Shared by compare.sh, compare-embedded.sh, scaling.sh and at-scale.sh
# (sourced, not run): the flags they all take, the output directories and the keel binary.
#
# The sourcing script sets TIME, RUNS, OUT and WORK (defaults), EXTRA_FLAG
# and EXTRA_VAR (its own flag, e.g. --limits, and the variable it sets), or
# for several flags of its own the array EXTRA_FLAGS of FLAG=VAR pairs
# (e.g. `EXTRA_FLAGS=(--engines=ENGINES --tables=TABLES)`), and HELP_LINES
# (the sed range of its header comment), then calls `parse_args "$@"`.
# Relative --out, --work and KEEL paths are taken from the caller's
# directory; afterwards the current directory is the repository's root and
# KEEL, OUT and WORK are absolute.

parse_args() {
  local extra=(${EXTRA_FLAGS[@]+"${EXTRA_FLAGS[@]}"}) pair
  if [ -n "${EXTRA_FLAG:-}" ]; then extra+=("$EXTRA_FLAG=$EXTRA_VAR"); fi
  while [ $# -gt 0 ]; do
    case "$1" in
      --time) TIME=$2; shift 2 ;;
      --runs) RUNS=$2; shift 2 ;;
      --out) OUT=$2; shift 2 ;;
      --work) WORK=$2; shift 2 ;;
      -h|--help) sed -n "$HELP_LINES" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *)
        for pair in ${extra[@]+"${extra[@]}"}; do
          if [ "$1" = "${pair%%=*}" ]; then
            printf -v "${pair#*=}" '%s' "$2"; shift 2; continue 2
          fi
        done
        echo "$(basename "$0"): unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
  done
  mkdir -p "$OUT" "$WORK"
  OUT=$(realpath "$OUT")
  WORK=$(realpath "$WORK")
  if [ -n "${KEEL:-}" ]; then KEEL=$(realpath "$KEEL"); fi
  cd "$(dirname "$0")/.."
  KEEL=${KEEL:-$PWD/target/release/keel}
  if [ ! -x "$KEEL" ]; then
    cargo build --release -p keel-cli
  fi
}

# True if this build's `keel bench oltp` has engine $1; otherwise says how
# to build it and returns 1. (The engines in the build are read from
# `--help` once.)
in_build() {
  if [ -z "${BUILT+set}" ]; then
    BUILT=$("$KEEL" bench oltp --help | sed -n 's/.*in this build: \([a-z, ]*\)\..*/\1/p')
  fi
  case ", $BUILT," in *", $1,"*) return 0 ;; esac
  echo "== $1: not in this build (cargo build --release -p keel-cli --features $1)"
  return 1
}

# Merges the runs' JSON files "$@" with `keel report --repeats` into
# $OUT/report (its summary in $OUT/report.txt), after removing the work
# directory if it is empty; then checks for python3, which the caller
# runs for its table: without it, says so and exits 1. $1 names what
# the caller draws with it (e.g. "table").
merge_reports() {
  local what=$1
  shift
  rmdir "$WORK" 2> /dev/null || true
  "$KEEL" report --repeats "$@" --out "$OUT/report" > "$OUT/report.txt"
  if ! command -v python3 > /dev/null; then
    echo "$(basename "$0"): python3 not found: no $what (see $OUT/report.txt)" >&2
    exit 1
  fi
}
