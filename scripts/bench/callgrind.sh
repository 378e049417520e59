# Helpers the instruction-count scripts share (sourced, not run): the criterion bench binaries to
# measure, one callgrind run of a bench, and the counts read from its output, per request.
# The sourcing script runs under `set -euo pipefail`; sourcing it moves to the repository's root,
# where the benches are built.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# bench_binaries BENCH [BINARY...]: sets `binaries` to the given built benches or, without any,
# to src-runtime's criterion bench BENCH built from this checkout, and `work` to a folder removed
# when the script exits.
bench_binaries() {
  local bench=$1 built
  shift
  command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install -y valgrind)" >&2; exit 2; }
  binaries=("$@")
  if [ ${#binaries[@]} -eq 0 ]; then
    built=$(cargo bench -p src-runtime --bench "$bench" --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -n 1)
    [ -n "$built" ] || { echo "could not build the $bench bench" >&2; exit 2; }
    binaries=("$built")
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
}

# profile BINARY RUN ID SECONDS [OPTION...]: runs bench ID of BINARY under callgrind for SECONDS
# of the bench's own time (RUN tells apart runs of the same binary) and sets `out` (the callgrind
# output), `total` (the whole process's instructions, setup included), `tree` (each function's
# callees, annotated with the OPTIONs) and `annotated` (each function's inclusive count).
profile() {
  local bin=$1 run=$2 id=$3 seconds=$4
  shift 4
  out=$work/$(basename "$bin").$run.out
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" --bench --profile-time "$seconds" \
    --exact "$id" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
  total=$(sed -n 's/^summary: //p' "$out" | head -n 1)
  # `--auto=no`: a binary with line tables would also get its sources annotated, and each call
  # line there (`=> callee (Nx)`) would count the callee's calls a second time.
  tree=$(callgrind_annotate --auto=no --inclusive=yes --tree=calling "$@" "$out" 2>/dev/null)
  # Every function, however small its share (the default threshold leaves out the last 1 %).
  annotated=$(callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$out" 2>/dev/null)
}

# calls CALLEE: the calls made to CALLEE (a regex), summed over its callers in `tree`. A call line
# reads `> callee (Nx)` (valgrind 3.19) or `=> callee (Nx)`; no match counts 0.
calls() {
  { grep -E "(^|[[:space:]])=?> +.*$1 \\(" <<<"$tree" || true; } |
    sed -E 's/.*\(([0-9,]+)x\).*$/\1/' | tr -d , | awk '{s += $1} END {print s + 0}'
}

# count FUNCTION: FUNCTION's (a regex) inclusive count in `annotated`, empty where it is not
# there. The first listed line of a function is its inclusive count (its own line sorts above its
# callers', a recursive one's outer call above its inner ones).
count() {
  { grep -E "$1 \\[" <<<"$annotated" || true; } | head -n 1 | awk '{print $1}' | tr -d ,
}

# per COUNT N: COUNT (0 where empty) divided by N, the requests the run made.
per() {
  echo $((${1:-0} / $2))
}

# keep: copies the run's callgrind output into BENCH_KEEP, where that names a folder.
keep() {
  if [ -n "${BENCH_KEEP:-}" ]; then
    mkdir -p "$BENCH_KEEP" && cp "$out" "$BENCH_KEEP/"
  fi
}
