// Steps 1 and 2 of the offline analysis: preprocessing and strata (hla.h).
#include <libalglib/dataanalysis.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "xfer/hla.h"
#include "xfer/stats.h"

namespace xfer::hla {

namespace {

// Iglewicz-Hoaglin modified z-score: 0.6745 (x - median) / MAD.
std::vector<bool> outliers(const std::vector<double>& x) {
  std::vector<bool> out(x.size(), false);
  if (x.size() < 4) return out;
  double med = median(x);
  std::vector<double> dev;
  for (double v : x) dev.push_back(std::abs(v - med));
  double mad = median(dev);
  if (mad <= 0) return out;
  for (size_t i = 0; i < x.size(); ++i) out[i] = 0.6745 * std::abs(x[i] - med) / mad > 3.5;
  return out;
}

// What a run's own jobs measured of its path (history.h: link_source), not
// configured or assumed figures.
bool link_measured(const RunRow& r) { return r.link_source.rfind("measured", 0) == 0; }
bool loss_measured(const RunRow& r) { return r.link_source.find("loss measured") != std::string::npos; }

}  // namespace

std::string path_key(const std::string& origin, const std::string& dest_host) {
  std::string o = origin;
  if (size_t at = o.find("://"); at != std::string::npos) o = o.substr(at + 3);
  if (size_t at = o.find('@'); at != std::string::npos) o = o.substr(at + 1);  // (no user in a history's origin)
  if (!o.empty() && o.front() == '[') o = o.substr(0, o.find(']') + 1);  // an IPv6 literal: up to its bracket
  else o = o.substr(0, o.find_first_of(":/"));
  return o.empty() ? "" : o + " -> " + dest_host;
}

std::vector<PathFacts> path_facts(const HistoryData& h) {
  struct Acc {
    PathFacts f;
    std::vector<double> losses, rtts;
  };
  std::map<std::string, Acc> by;
  for (const RunRow& r : h.runs) {
    if (r.outcome != "done") continue;
    std::string k = path_key(r.source_origin, r.dest_host);
    if (k.empty()) continue;
    Acc& a = by[k];
    a.f.path = k;
    ++a.f.runs;
    a.f.newest_unix = std::max(a.f.newest_unix, r.finished_unix > 0 ? r.finished_unix : r.started_unix);
    if (link_measured(r)) a.f.link_mbps = std::max(a.f.link_mbps, r.link_mbps);
    if (loss_measured(r) && r.loss_pct) a.losses.push_back(*r.loss_pct);
    if (r.handshake_rtt_ms > 0) a.rtts.push_back(r.handshake_rtt_ms);
  }
  std::vector<PathFacts> out;
  for (auto& [k, a] : by) {
    if (!a.losses.empty()) a.f.loss_pct = median(a.losses);
    if (!a.rtts.empty()) a.f.rtt_ms = median(a.rtts);
    out.push_back(std::move(a.f));
  }
  return out;
}

Preprocessed preprocess(const HistoryData& h) {
  Preprocessed p;
  p.input = h.intervals.size();
  std::map<std::pair<std::string, std::string>, const RunRow*> runs;
  for (const RunRow& r : h.runs) runs[{r.node, r.run}] = &r;
  // Each run's usual interval (the median), to tell a partial one.
  std::map<const RunRow*, std::vector<double>> lengths;
  for (const IntervalRow& i : h.intervals)
    if (auto it = runs.find({i.node, i.run}); it != runs.end()) lengths[it->second].push_back(i.interval_s);
  std::map<const RunRow*, double> usual;
  for (auto& [r, v] : lengths) usual[r] = median(v);
  // Each run's external load: the median over its intervals. The share of
  // the link that is not ours depends on our own settings too (more flows
  // take more from the cross traffic) and one interval's figure is noisy
  // (app bytes lag the interface's by what sits in socket buffers), so a
  // visit's own figure would scatter one run's settings over the bands.
  std::map<std::pair<std::string, std::string>, std::map<int64_t, double>> loads_by_seq;
  for (const IntervalRow& i : h.intervals)
    if (i.ext_load) loads_by_seq[{i.node, i.run}][i.seq] = *i.ext_load;
  std::map<std::pair<std::string, std::string>, double> run_load;
  for (auto& [r, m] : loads_by_seq) {
    std::vector<double> v;
    for (auto& [seq, l] : m) v.push_back(l);
    run_load[r] = median(v);
  }

  // The path's figures (path_facts), for each run on it.
  std::map<std::string, PathFacts> paths;
  for (PathFacts& f : path_facts(h)) paths.emplace(f.path, std::move(f));
  auto path_of_run = [](const RunRow& r) {
    std::string k = path_key(r.source_origin, r.dest_host);
    return k.empty() ? "run " + r.node + "/" + r.run : k;
  };
  auto link_of = [&](const RunRow& r) {
    auto it = paths.find(path_of_run(r));
    return link_measured(r) && it != paths.end() && it->second.link_mbps > 0 ? it->second.link_mbps : r.link_mbps;
  };
  auto loss_of = [&](const RunRow& r) {
    auto it = paths.find(path_of_run(r));
    return loss_measured(r) && it != paths.end() && it->second.loss_pct >= 0 ? it->second.loss_pct
                                                                             : r.loss_pct.value_or(0);
  };

  enum Rule { NotDone, Settling, Partial, Idle, AboveLink, Impossible, Outlier, kRules };
  const char* names[kRules] = {
      "the run did not end done (failed, cancelled, interrupted or cut off)",
      "settling: the interval began with new cc / p / pp (or was the run's first), or held a one-off of the "
      "measuring (kOneOffTag)",
      "partial: shorter than half the run's usual interval (the tail)",
      "idle: the chunk moved no byte",
      "throughput above the link rate (impossible: a measuring error)",
      "impossible settings or figures: cc, p, pp, cores or freq_khz outside what xferd sets, or a figure that is not "
      "a finite number",
      "outlier: modified z-score > 3.5 (Iglewicz-Hoaglin) of throughput or J/GB among the run's rows at the same params",
  };
  std::array<size_t, kRules> removed{};
  // Blocks: a stretch of one run's chunk at the same params (a setting held
  // once). A sweep that visits a setting twice gives two samples of it.
  std::map<std::tuple<std::string, std::string, int64_t>, std::pair<std::array<int64_t, 5>, int>> last;
  std::vector<Sample> kept;
  std::vector<int> kept_block;
  // A finished run's chunk whose every interval was settling or partial (a
  // short job) keeps those rather than nothing: its only figures, averaged
  // as one sample like any other.
  struct Spare {
    Sample s;
    int block;
    Rule why;
  };
  std::map<std::pair<std::string, int64_t>, std::vector<Spare>> spare;
  std::set<std::pair<std::string, int64_t>> has_steady;
  for (const IntervalRow& i : h.intervals) {
    std::array<int64_t, 5> params{i.cc, i.p, i.pp, i.cores.value_or(0), i.freq_khz.value_or(0)};
    auto [bit, fresh_block] = last.try_emplace({i.node, i.run, i.chunk}, params, 0);
    if (!fresh_block && (bit->second.first != params || i.settling)) bit->second = {params, bit->second.second + 1};
    int block = bit->second.second;
    auto it = runs.find({i.node, i.run});
    const RunRow* r = it == runs.end() ? nullptr : it->second;
    // The first rule that holds is the one counted (in the order of names).
    Rule soft = kRules, hard = kRules;
    if (!r || r->outcome != "done") {
      ++removed[NotDone];
      continue;
    }
    if (i.settling || i.reason.find(kOneOffTag) != std::string::npos) soft = Settling;
    else if (i.interval_s < 0.5 * usual[r]) soft = Partial;
    if (i.bytes_interval <= 0 || i.throughput_bps <= 0) hard = Idle;
    else if (link_of(*r) > 0 && i.throughput_bps > link_of(*r) * 1e6 * 1.02) hard = AboveLink;
    else if (!Knobs::possible(i.cc, i.p, i.pp, i.cores.value_or(1), i.freq_khz.value_or(0)) ||
             !std::isfinite(i.throughput_bps) || !std::isfinite(i.interval_s) ||
             (i.dynamic_joules && !std::isfinite(*i.dynamic_joules)) || (i.joules && !std::isfinite(*i.joules)))
      hard = Impossible;
    Rule why = soft != kRules ? soft : hard;
    if (hard != kRules) {
      ++removed[why];
      continue;
    }
    Sample s;
    s.run = i.node + "/" + i.run;
    s.chunk = i.chunk;
    s.path = path_of_run(*r);
    s.t_unix = i.t_unix;
    s.link_mbps = link_of(*r), s.rtt_ms = r->handshake_rtt_ms, s.loss_pct = loss_of(*r);
    s.files = double(i.chunk_files), s.bytes = double(i.chunk_bytes), s.size_mean = i.chunk_size_mean;
    s.size_sd = i.chunk_size_sd;
    if (auto l = run_load.find({i.node, i.run}); l != run_load.end()) s.ext_load = l->second;
    s.explored = i.reason.find(kExploreTag) != std::string::npos;
    s.cc = int(i.cc), s.p = int(i.p), s.pp = int(i.pp);
    s.cores = int(i.cores.value_or(r->cores_present > 0 ? r->cores_present : 1));
    s.freq_khz = long(i.freq_khz.value_or(0));
    s.mbps = i.throughput_bps / 1e6;
    s.gb = double(i.bytes_interval) / 1e9;
    // The dynamic energy (cross-layer-hla subtracts the idle baseline);
    // rows that have only the whole (imported logs) give that.
    if (std::optional<double> j = i.dynamic_joules ? i.dynamic_joules : i.joules) s.j_per_gb = *j / s.gb;
    if (why != kRules) {
      // Settling or partial: counted as removed unless its chunk has nothing else.
      ++removed[why];
      spare[{s.run, s.chunk}].push_back({std::move(s), block, why});
      continue;
    }
    has_steady.insert({s.run, s.chunk});
    kept.push_back(std::move(s));
    kept_block.push_back(block);
  }
  for (auto& [key, rows] : spare) {
    if (has_steady.count(key)) continue;
    for (Spare& x : rows) {
      --removed[x.why];
      ++p.reinstated;
      kept.push_back(std::move(x.s));
      kept_block.push_back(x.block);
    }
  }
  // Outliers among the rows of one run at one set of params.
  using Key = std::tuple<std::string, int64_t, int, int, int, int, long>;
  auto key_of = [](const Sample& s) { return Key{s.run, s.chunk, s.cc, s.p, s.pp, s.cores, s.freq_khz}; };
  std::map<Key, std::vector<size_t>> groups;
  for (size_t k = 0; k < kept.size(); ++k) groups[key_of(kept[k])].push_back(k);
  std::vector<bool> drop(kept.size(), false);
  for (auto& [key, idx] : groups) {
    std::vector<double> t, e;
    for (size_t k : idx) t.push_back(kept[k].mbps);
    std::vector<bool> ot = outliers(t), oe(idx.size(), false);
    bool all_e = std::all_of(idx.begin(), idx.end(), [&](size_t k) { return kept[k].j_per_gb.has_value(); });
    if (all_e) {
      for (size_t k : idx) e.push_back(*kept[k].j_per_gb);
      oe = outliers(e);
    }
    for (size_t j = 0; j < idx.size(); ++j) drop[idx[j]] = ot[j] || oe[j];
  }
  // One sample per block (run, chunk, params held once): the rows'
  // throughput averaged over their time, their energy over their bytes.
  using BlockKey = std::pair<Key, int>;
  std::map<BlockKey, Sample> merged;
  std::map<BlockKey, double> time, joules, sq;  // sq: time-weighted sum of the intervals' Mbit/s squared
  std::map<BlockKey, bool> all_energy;
  for (size_t k = 0; k < kept.size(); ++k) {
    if (drop[k]) {
      ++removed[Outlier];
      continue;
    }
    ++p.kept;
    const Sample& x = kept[k];
    BlockKey key_k{key_of(x), kept_block[k]};
    double dt = x.gb * 8e3 / x.mbps;  // seconds of the interval (GB / (Mbit/s))
    auto [it, fresh] = merged.emplace(key_k, x);
    all_energy.emplace(key_k, true);
    if (fresh) it->second.gb = 0, it->second.intervals = 0;
    Sample& m = it->second;
    m.gb += x.gb;
    m.intervals += 1;
    m.t_unix = std::max(m.t_unix, x.t_unix);
    m.explored = m.explored || x.explored;
    time[key_k] += dt;
    sq[key_k] += dt * x.mbps * x.mbps;
    if (x.j_per_gb) joules[key_k] += *x.j_per_gb * x.gb;
    else all_energy[key_k] = false;
  }
  for (auto& [k, m] : merged) {
    m.mbps = m.gb * 8e3 / time[k];
    m.seconds = time[k];
    m.mbps_sd = m.intervals > 1 ? std::sqrt(std::max(0.0, sq[k] / time[k] - m.mbps * m.mbps)) : 0;
    m.j_per_gb = all_energy[k] ? std::optional<double>(joules[k] / m.gb) : std::nullopt;
    p.samples.push_back(std::move(m));
  }
  for (int r = 0; r < kRules; ++r) p.rules.push_back({names[r], removed[size_t(r)]});
  // What older runs taught (compact()), each folded row one sample, its
  // weight fallen to the newest figure in the history: recent behaviour
  // weighs more, and a history nobody writes to any more keeps its weights.
  double newest = 0;
  for (const IntervalRow& i : h.intervals) newest = std::max(newest, i.t_unix);
  for (const FoldedRow& f : h.folded) newest = std::max(newest, f.decayed_to);
  for (const FoldedRow& f : h.folded) {
    Sample s = folded_sample(decayed(f, newest));
    if (s.seconds <= 0 || s.gb <= 0 || !std::isfinite(s.mbps)) continue;
    p.samples.push_back(std::move(s));
    ++p.folded;
  }
  return p;
}

std::vector<MeasuredSetting> measured_settings(const std::vector<Sample>& s, const std::vector<size_t>& rows) {
  std::map<std::tuple<int, int, int, int, long>, std::vector<const Sample*>> by;
  for (size_t r : rows) by[{s[r].cc, s[r].p, s[r].pp, s[r].cores, s[r].freq_khz}].push_back(&s[r]);
  std::vector<MeasuredSetting> out;
  for (auto& [key, v] : by) {
    MeasuredSetting m;
    m.knobs = {std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key), std::get<4>(key)};
    m.visits = v.size();
    double joules = 0;
    bool energy = true;
    for (const Sample* x : v) {
      double t = x->seconds > 0 ? x->seconds : x->mbps > 0 ? x->gb * 8e3 / x->mbps : 0;
      m.seconds += t, m.gb += x->gb;
      if (x->j_per_gb) joules += *x->j_per_gb * x->gb;
      else energy = false;
    }
    m.mbps = m.seconds > 0 ? m.gb * 8e3 / m.seconds : 0;
    m.j_per_gb = energy && m.gb > 0 ? joules / m.gb : 0;
    if (v.size() > 1) {
      double ss = 0;
      for (const Sample* x : v) ss += (x->mbps - m.mbps) * (x->mbps - m.mbps);
      m.mbps_sd = std::sqrt(ss / double(v.size() - 1));
    } else {
      m.mbps_sd = v.front()->mbps_sd;
    }
    out.push_back(m);
  }
  return out;
}

Dendrogram upgma(const std::vector<std::vector<double>>& points, double cut) {
  Dendrogram d;
  size_t n = points.size();
  if (n == 0) return d;
  if (n == 1) {
    d.cluster = {0};
    d.k = 1;
    return d;
  }
  size_t f = points[0].size();
  alglib::real_2d_array xy;
  xy.setlength(alglib::ae_int_t(n), alglib::ae_int_t(f));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < f; ++j) xy[alglib::ae_int_t(i)][alglib::ae_int_t(j)] = points[i][j];
  alglib::clusterizerstate s;
  alglib::ahcreport rep;
  alglib::clusterizercreate(s);
  alglib::clusterizersetpoints(s, xy, 2);  // Euclidean
  alglib::clusterizersetahcalgo(s, 2);     // unweighted average linkage (UPGMA)
  alglib::clusterizerrunahc(s, rep);
  for (alglib::ae_int_t i = 0; i < alglib::ae_int_t(n) - 1; ++i) {
    d.merges.push_back({int(rep.z[i][0]), int(rep.z[i][1])});
    d.heights.push_back(rep.mergedist[i]);
  }
  alglib::ae_int_t k = 0;
  alglib::integer_1d_array cidx, cz;
  alglib::clusterizerseparatedbydist(rep, cut, k, cidx, cz);
  // Renumber in order of each cluster's first point.
  std::map<int, int> order;
  for (size_t i = 0; i < n; ++i) {
    int c = int(cidx[alglib::ae_int_t(i)]);
    if (!order.count(c)) order[c] = int(order.size());
    d.cluster.push_back(order[c]);
  }
  d.k = int(k);
  return d;
}

std::vector<double> path_features(double link_mbps, double rtt_ms, double loss_pct) {
  return {std::log10(std::max(link_mbps, 1e-3)), std::log10(std::max(rtt_ms, 0.1)), std::log10(1 + 100 * loss_pct)};
}
std::vector<double> dataset_features(double bytes, double files, double size_mean, double size_sd) {
  // The spread as a share of the mean (coefficient of variation), not in
  // bytes: log10(1 + sd) put one file (sd 0) six units from two files of the
  // same size (sd of a few MB), so a one-video chunk matched no video stratum.
  // log10(1 + 100 cv) keeps the spread's weight in the tier (0 for one file,
  // 0.7 for two videos 4% apart, 1.4 for the html shape, 2.5 for the
  // long-tailed one); plain cv (0..3) let the default collect's strata merge
  // shapes that log10(1 + sd) kept apart (predictor R2 0.77 -> 0.52).
  return {std::log10(std::max(bytes, 1.0)), std::log10(std::max(files, 1.0)), std::log10(std::max(size_mean, 1.0)),
          std::log10(1 + 100 * size_sd / std::max(size_mean, 1.0))};
}

namespace {

std::vector<double> path_of(const Sample& s) { return path_features(s.link_mbps, s.rtt_ms, s.loss_pct); }
std::vector<double> dataset_of(const Sample& s) { return dataset_features(s.bytes, s.files, s.size_mean, s.size_sd); }

// Clusters rows by their distinct feature vectors: returns per row its
// cluster. The features are first put on a grid of an eighth of the cut:
// every run measures its own RTT, so a history of N runs on a few paths
// had N distinct points, and UPGMA keeps N^2 distances; on the grid they
// are a few per path, and a point moves by at most a sixteenth of the cut
// per feature.
std::vector<int> cluster_rows(const std::vector<Sample>& s, const std::vector<size_t>& rows,
                              std::vector<double> (*features)(const Sample&), double cut, int* k) {
  std::map<std::vector<double>, int> distinct;
  std::vector<std::vector<double>> points;
  std::vector<int> point_of;
  const double step = cut / 8;
  for (size_t r : rows) {
    std::vector<double> f = features(s[r]);
    for (double& v : f) v = std::round(v / step) * step;
    auto [it, fresh] = distinct.emplace(f, int(points.size()));
    if (fresh) points.push_back(f);
    point_of.push_back(it->second);
  }
  Dendrogram d = upgma(points, cut);
  *k = d.k;
  std::vector<int> out;
  for (int p : point_of) out.push_back(d.cluster[size_t(p)]);
  return out;
}

}  // namespace

// Where this departs from cross-layer-hla §III-A step 2, and why (issue 43):
// - The paper's tier 1 is the external network, tier 3 the path (source,
//   destination, bandwidth, latency), with the load bands between. Here the
//   path comes first and the load last: a job knows its path (RTT at
//   discovery; link rate and loss as configured or measured) before it
//   moves a byte, and its load only once it runs, so the parameter cache
//   matches path, then dataset, and the online algorithms move between the
//   load bands of one path and dataset (Algorithms 1 and 2 do exactly that).
// - The paper also enforces "artificial boundaries" at the mean +- sd of the
//   achieved throughput and energy. Those are outcomes of the settings: a
//   stratum cut by them would hold the slow settings in one stratum and the
//   fast in another, so neither would have the surfaces over all settings
//   that eq. 10 / 11 search, and a job could not be matched to one before it
//   ran. The only boundaries here are on what a job knows (path, dataset)
//   and on the load (mean -/+ sd/2 of the tier-2 cluster's, as the paper
//   bands the load).
Strata stratify(const std::vector<Sample>& s, size_t min_rows) {
  Strata out;
  std::vector<size_t> all(s.size());
  std::iota(all.begin(), all.end(), 0);
  int k1 = 0;
  std::vector<int> c1 = cluster_rows(s, all, path_of, kPathCut, &k1);
  for (int p = 0; p < k1; ++p) {
    std::vector<size_t> prow;
    for (size_t i = 0; i < all.size(); ++i)
      if (c1[i] == p) prow.push_back(all[i]);
    Stratum path;
    for (size_t r : prow) path.link_mbps += s[r].link_mbps, path.rtt_ms += s[r].rtt_ms, path.loss_pct += s[r].loss_pct;
    double n1 = double(prow.size());
    path.link_mbps /= n1, path.rtt_ms /= n1, path.loss_pct /= n1;
    out.tree += fmt::format("P{}  path {:.0f} Mbit/s, {:.1f} ms RTT, {:.3f}% loss: {} rows\n", p + 1, path.link_mbps,
                            path.rtt_ms, path.loss_pct, prow.size());
    int k2 = 0;
    std::vector<int> c2 = cluster_rows(s, prow, dataset_of, kDatasetCut, &k2);
    for (int d = 0; d < k2; ++d) {
      std::vector<size_t> drow;
      for (size_t i = 0; i < prow.size(); ++i)
        if (c2[i] == d) drow.push_back(prow[i]);
      Stratum ds = path;
      double n2 = double(drow.size()), lm = 0, lsq = 0;
      for (size_t r : drow) {
        ds.files += s[r].files / n2, ds.bytes += s[r].bytes / n2, ds.size_mean += s[r].size_mean / n2;
        ds.size_sd += s[r].size_sd / n2;
        lm += s[r].ext_load / n2;
        lsq += s[r].ext_load * s[r].ext_load / n2;
      }
      double lsd = std::sqrt(std::max(0.0, lsq - lm * lm));
      out.tree += fmt::format("  P{}/D{}  dataset {:.0f} files, {:.1f} MB, mean {:.0f} KB (sd {:.0f} KB): {} rows\n",
                              p + 1, d + 1, ds.files, ds.bytes / 1e6, ds.size_mean / 1e3, ds.size_sd / 1e3, drow.size());
      // Tier 3: external load bands from the load distribution's mean and sd.
      std::vector<double> bounds = {0};
      if (lsd >= 0.02) {
        for (double b : {lm - lsd / 2, lm + lsd / 2})
          if (b > bounds.back() + 1e-9 && b < 1) bounds.push_back(b);
      }
      bounds.push_back(1.0000001);
      std::vector<std::vector<size_t>> bands(bounds.size() - 1);
      for (size_t r : drow)
        for (size_t b = 0; b + 1 < bounds.size(); ++b)
          if (s[r].ext_load >= bounds[b] && s[r].ext_load < bounds[b + 1]) {
            bands[b].push_back(r);
            break;
          }
      // A thin band joins its neighbour (the lower one, else the upper).
      for (size_t b = 0; b < bands.size() && bands.size() > 1;) {
        if (bands[b].size() >= min_rows) {
          ++b;
          continue;
        }
        size_t into = b > 0 ? b - 1 : b + 1;
        bands[into].insert(bands[into].end(), bands[b].begin(), bands[b].end());
        bands.erase(bands.begin() + long(b));
        bounds.erase(bounds.begin() + long(b > 0 ? b : 1));
        b = 0;
      }
      for (size_t b = 0; b < bands.size(); ++b) {
        Stratum st = ds;
        st.load_lo = bounds[b], st.load_hi = std::min(1.0, bounds[b + 1]);
        st.rows = bands[b];
        std::sort(st.rows.begin(), st.rows.end());
        st.id = fmt::format("P{}/D{}/L{}", p + 1, d + 1, b + 1);
        out.tree += fmt::format("    {}  external load (runs' median) {:.2f}-{:.2f}: {} rows{}\n", st.id, st.load_lo, st.load_hi,
                                st.rows.size(), st.rows.size() < min_rows ? " (too few to fit: its measured settings)" : "");
        out.strata.push_back(std::move(st));
      }
    }
  }
  return out;
}

}  // namespace xfer::hla
