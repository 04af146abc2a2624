// FastHLA's parameter cache (fasthla-mobile.txt §4 step 5): a job's path and
// dataset matched against the table's strata by the tiers' own coordinates
// and cuts, and the entry for its SLA (hla.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "xfer/hla.h"

namespace xfer::hla {

namespace {

// Over the coordinates the query knows (skip: those it does not).
double distance(const std::vector<double>& a, const std::vector<double>& b, const std::vector<bool>& skip = {}) {
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (i >= skip.size() || !skip[i]) d += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(d);
}

// "P1/D2/L3" -> "P1/D2", "P1".
std::string prefix(const std::string& id, int parts) {
  size_t at = 0;
  for (int i = 0; i < parts; ++i) {
    at = id.find('/', at + (i ? 1 : 0));
    if (at == std::string::npos) return id;
  }
  return id.substr(0, at);
}

}  // namespace

std::optional<CacheHit> lookup(const ParamTable& t, const Query& q) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // A link rate or a loss not measured yet (nor configured) is no
  // coordinate: the path is matched on what is known.
  std::vector<double> qp = path_features(std::max(q.link_mbps, 1e-3), q.rtt_ms, std::max(q.loss_pct, 0.0));
  std::vector<bool> unknown = {q.link_mbps <= 0, false, q.loss_pct < 0};
  std::vector<double> qd = dataset_features(q.bytes, q.files, q.size_mean, q.size_sd);
  // Tier 1: the nearest path.
  std::string path;
  double dp = kInf;
  for (const TableStratum& s : t.strata) {
    double d = distance(qp, path_features(s.link_mbps, s.rtt_ms, s.loss_pct), unknown);
    if (d < dp) dp = d, path = prefix(s.id, 1);
  }
  if (dp > kPathCut) return std::nullopt;
  // Tier 2: that path's nearest dataset.
  std::string group;
  double dd = kInf;
  for (const TableStratum& s : t.strata) {
    if (prefix(s.id, 1) != path) continue;
    double d = distance(qd, dataset_features(s.bytes, s.files, s.size_mean, s.size_sd));
    if (d < dd) dd = d, group = prefix(s.id, 2);
  }
  if (dd > kDatasetCut) return std::nullopt;
  CacheHit hit;
  hit.path_distance = dp, hit.dataset_distance = dd;
  for (const TableStratum& s : t.strata)
    if (prefix(s.id, 2) == group) hit.bands.push_back(&s);
  std::sort(hit.bands.begin(), hit.bands.end(),
            [](const TableStratum* a, const TableStratum* b) { return a->load_lo < b->load_lo; });
  // Tier 3: the band that holds the load (the lightest when none is known).
  if (q.ext_load >= 0)
    for (size_t i = 0; i < hit.bands.size(); ++i)
      if (q.ext_load >= hit.bands[i]->load_lo) hit.band = i;
  return hit;
}

const TableEntry* choose(const TableStratum& s, const std::string& sla, double bound, bool& met) {
  std::vector<const TableEntry*> by_level;
  for (const TableEntry& e : s.entries)
    if (e.sla == sla) by_level.push_back(&e);
  std::sort(by_level.begin(), by_level.end(), [](const TableEntry* a, const TableEntry* b) {
    return a->bound != b->bound ? a->bound < b->bound : a->level < b->level;
  });
  met = true;
  if (sla == "throughput") {
    if (by_level.empty()) return met = false, nullptr;
    // The steps of eq. 10's answer rise with the floor: the first whose
    // bound reaches it answers it (hla.h sla_entries).
    if (bound > 0)
      for (const TableEntry* e : by_level)
        if (e->choice.feasible && e->bound >= bound) return e;
    met = bound <= 0;
    return by_level.back();
  }
  if (by_level.empty()) {  // no energy figures behind this stratum: its cheapest throughput level
    met = false;
    const TableEntry* cheapest = nullptr;
    for (const TableEntry& e : s.entries)
      if (e.sla == "throughput" && (!cheapest || e.level < cheapest->level)) cheapest = &e;
    return cheapest;
  }
  // eq. 11's steps rise with the ceiling: the last that starts within it.
  if (bound <= 0) return by_level.front();
  const TableEntry* best = nullptr;
  for (const TableEntry* e : by_level)
    if (e->choice.feasible && e->bound <= bound) best = e;
  if (best) return best;
  met = false;
  return by_level.front();
}

const TableEntry* choose_level(const TableStratum& s, const std::string& sla, double level, bool& met) {
  // Level 1: the most throughput (the last throughput step), the least
  // energy (the first energy step).
  const TableEntry* one = nullptr;
  for (const TableEntry& e : s.entries)
    if (e.sla == sla && (!one || (sla == "throughput" ? e.bound > one->bound : e.bound < one->bound))) one = &e;
  if (!one) return choose(s, sla, 0, met);
  return choose(s, sla, level * one->bound, met);
}

}  // namespace xfer::hla
