#!/usr/bin/env python3
"""A floor judged per run from an xfer-bench output folder's logs.

  scripts/floor-band.py OUT FLOOR_MBPS [LOG_PREFIX]

For each run (OUT/logs/PREFIX*-r*.out, the xferctl JSON with its timeline):
the share of its intervals after the first two within [1.0, 1.15] x the
floor (the final interval dropped when under half the median interval), as
the bench's goal table judges a floor (tools/bench/report.cpp); their
average over the floor; the last judged interval's rate. Then every miss
as (interval, Mbit/s, seconds, among the last two judged). Where no peer
ran the bench makes no goal table; this judges the same way. LOG_PREFIX
picks one client's runs (bench-ab.sh: "DATASET-0" this tree, "DATASET-1"
the build before).
"""
import glob
import json
import statistics
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
out, floor = sys.argv[1], float(sys.argv[2])
prefix = sys.argv[3] if len(sys.argv) > 3 else ''
held, avgs, lasts, tails = [], [], [], []
for f in sorted(glob.glob(out + '/logs/' + prefix + '*-r*.out')):
    try:
        tl = json.load(open(f)).get('timeline', [])
    except (OSError, ValueError):
        continue
    t = [e['t'] for e in tl]
    m = [e['throughput_mbps'] for e in tl]
    if len(t) <= 2:
        continue
    dt = [t[k] - (t[k - 1] if k else 0) for k in range(len(t))]
    end = len(t)
    if dt[-1] < 0.5 * statistics.median(dt):
        end -= 1
    ks = range(2, end)
    if not ks:
        continue
    held.append(sum(1 for k in ks if floor <= m[k] <= 1.15 * floor) / len(ks))
    avgs.append(sum(m[k] * dt[k] for k in ks) / sum(dt[k] for k in ks) / floor)
    lasts.append(m[end - 1])
    tails.append([(k, round(m[k]), round(dt[k], 2), k >= end - 2) for k in ks if not floor <= m[k] <= 1.15 * floor])
if not held:
    sys.exit('floor-band.py: no judged runs under %s/logs/%s*-r*.out' % (out, prefix))
print('runs', len(held), 'median held %.0f%%' % (100 * statistics.median(held)),
      'mean %.1f%%' % (100 * statistics.mean(held)), 'runs at 100%%: %d' % sum(h == 1 for h in held),
      'median avg %.3f' % statistics.median(avgs))
print('misses: under', sum(1 for ms in tails for x in ms if x[1] < floor),
      'over', sum(1 for ms in tails for x in ms if x[1] > floor),
      'in the last two judged', sum(1 for ms in tails for x in ms if x[3]))
print('last judged interval: median %.0f Mbit/s, lowest five %s' %
      (statistics.median(lasts), [round(x) for x in sorted(lasts)[:5]]))
for ms in tails:
    if ms:
        print(ms)
