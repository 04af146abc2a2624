#!/usr/bin/env bash
# Replays the table builds of hla-learning runs with two xfer-hla builds:
# each curve's history cut after 1..6 rounds (8 runs a round: hla-learning's
# four recorded clients on two datasets), analyzed by both, and each
# stratum's least-energy entry (eq. 11 at the least J/GB: what hla-energy
# starts from) printed side by side, with its predicted Mbit/s over the
# stratum's best. A change in `xfer-hla analyze` shows here on the same
# histories, apart from the run-to-run scatter of the jobs themselves.
#   hla-table-replay.sh XFER_HLA_BEFORE XFER_HLA_AFTER RESULT_DIR...
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 XFER_HLA_BEFORE XFER_HLA_AFTER RESULT_DIR..." >&2
  exit 2
fi
before=$1 after=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
entries() {
  python3 - "$1" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
for s in t['strata']:
    energy = [e for e in s['entries'] if e['sla'] == 'energy']
    best = max((e['predicted']['mbps'] for e in s['entries'] if e['sla'] == 'throughput'), default=0)
    if not energy:
        continue
    p, got = energy[0]['params'], energy[0]['predicted']['mbps']
    print(f"{round(s['dataset'].get('files', 0))} {p['cc']}x{p['p']}x{p['pp']} {got:.0f}/{best:.0f}")
PY
}
echo "result curve rounds files | before: setting Mbit/s/best | after | changed"
for dir in "$@"; do
  for history in "$dir"/learning/curve-*/history.db; do
    curve=$(basename "$(dirname "$history")")
    for rounds in 1 2 3 4 5 6; do
      cp "$history" "$work/h.db"
      sqlite3 "$work/h.db" "create temp table late as select run from hla_runs order by started_unix limit -1 offset $((8 * rounds));
        delete from hla_intervals where run in (select run from late); delete from hla_runs where run in (select run from late);"
      "$before" analyze --history "$work/h.db" --out "$work/before.json" >/dev/null
      "$after" analyze --history "$work/h.db" --out "$work/after.json" >/dev/null
      join -j1 <(entries "$work/before.json" | sort) <(entries "$work/after.json" | sort) |
        while read -r files b_set b_fig a_set a_fig; do
          mark=""
          [ "$b_set $b_fig" != "$a_set $a_fig" ] && mark="changed"
          echo "$(basename "$dir") ${curve#curve-} $rounds $files | $b_set $b_fig | $a_set $a_fig | $mark"
        done
      rm -f "$work"/h.db*
    done
  done
done
