// FastHLA step 4 (fasthla-mobile.txt §4): a learned predictor for jobs whose
// stratum the table lacks. Random decision forests (ALGLIB dfbuilder), one
// per parameter, on the table's optima; judged leaving one stratum out.
#include <libalglib/dataanalysis.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "xfer/hla.h"

namespace xfer::hla {

namespace {

constexpr int kTrees = 60;
const char* kOutputs[] = {"cc", "p", "pp", "cores"};

// The strata's own coordinates (path, then dataset), the load between.
std::vector<double> case_inputs(const TableStratum& s, const std::string& sla, double level) {
  std::vector<double> f = path_features(s.link_mbps, s.rtt_ms, s.loss_pct);
  f.push_back((s.load_lo + s.load_hi) / 2);
  for (double v : dataset_features(s.bytes, s.files, s.size_mean, s.size_sd)) f.push_back(v);
  f.push_back(sla == "energy" ? 1 : 0);
  f.push_back(level);
  return f;
}

// Parameters as levels: log2 for cc / p / pp, cores as they are.
std::array<double, 4> levels_of(const Knobs& k) {
  return {std::log2(double(k.cc)), std::log2(double(k.p)), std::log2(double(k.pp)), double(k.cores)};
}

alglib::decisionforest grow(const std::vector<std::vector<double>>& x, const std::vector<double>& y, uint64_t seed) {
  size_t n = x.size(), f = x.empty() ? 0 : x[0].size();
  alglib::real_2d_array xy;
  xy.setlength(alglib::ae_int_t(n), alglib::ae_int_t(f + 1));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < f; ++j) xy[alglib::ae_int_t(i)][alglib::ae_int_t(j)] = x[i][j];
    xy[alglib::ae_int_t(i)][alglib::ae_int_t(f)] = y[i];
  }
  alglib::decisionforestbuilder b;
  alglib::dfbuildercreate(b);
  alglib::dfbuildersetdataset(b, xy, alglib::ae_int_t(n), alglib::ae_int_t(f), 1);  // 1 class: regression
  alglib::dfbuildersetseed(b, alglib::ae_int_t(seed % 1000000 + 1));
  alglib::decisionforest df;
  alglib::dfreport rep;
  alglib::dfbuilderbuildrandomforest(b, kTrees, df, rep);
  return df;
}

double run(const alglib::decisionforest& df, const std::vector<double>& x) {
  alglib::real_1d_array in;
  in.setcontent(alglib::ae_int_t(x.size()), x.data());
  return alglib::dfprocess0(df, in);
}

struct Cases {
  std::vector<std::vector<double>> x;
  std::vector<std::array<double, 4>> y;
  std::vector<size_t> stratum;
};

Cases cases_of(const ParamTable& t) {
  Cases c;
  for (size_t i = 0; i < t.strata.size(); ++i)
    for (const TableEntry& e : t.strata[i].entries) {
      c.x.push_back(case_inputs(t.strata[i], e.sla, e.level));
      c.y.push_back(levels_of(e.choice.knobs));
      c.stratum.push_back(i);
    }
  return c;
}


// Where a value sits among the history's levels of its parameter, as a
// fractional index (log-interpolated; cores linear): "within one level"
// compares these.
double position(const std::vector<double>& levels, double v, bool log) {
  if (levels.empty()) return 0;
  auto tr = [&](double x) { return log ? std::log2(std::max(x, 1e-9)) : x; };
  if (v <= levels.front()) return 0;
  if (v >= levels.back()) return double(levels.size() - 1);
  size_t i = size_t(std::upper_bound(levels.begin(), levels.end(), v) - levels.begin());
  double a = tr(levels[i - 1]), b = tr(levels[i]);
  return double(i - 1) + (b > a ? (tr(v) - a) / (b - a) : 0);
}

Knobs knobs_from(const std::array<double, 4>& y) {
  Knobs k;
  k.cc = std::clamp(int(std::lround(std::exp2(y[0]))), 1, 4096);
  k.p = std::clamp(int(std::lround(std::exp2(y[1]))), 1, 64);
  k.pp = std::clamp(int(std::lround(std::exp2(y[2]))), 1, 128);
  k.cores = std::clamp(int(std::lround(y[3])), 1, 4096);
  return k;
}

std::array<double, 4> run_all(const std::array<alglib::decisionforest, 4>& df, const std::vector<double>& x) {
  std::array<double, 4> y{};
  for (size_t o = 0; o < 4; ++o) y[o] = run(df[o], x);
  return y;
}

std::array<alglib::decisionforest, 4> grow_all(const Cases& c, uint64_t seed) {
  std::array<alglib::decisionforest, 4> df;
  for (size_t o = 0; o < 4; ++o) {
    std::vector<double> y;
    for (const auto& v : c.y) y.push_back(v[o]);
    df[o] = grow(c.x, y, seed + o);
  }
  return df;
}

}  // namespace

PredictorReport train_predictor(ParamTable& t, const std::vector<StratumModel>& models, const std::vector<Sample>& s,
                                uint64_t seed) {
  PredictorReport r;
  Cases all = cases_of(t);
  if (all.x.size() < 4 || t.strata.size() < 2) {
    t.predictor = nullptr;
    return r;
  }
  // The history's levels of each parameter (the sweep's).
  std::array<std::vector<double>, 4> levels;
  for (const Sample& x : s) {
    levels[0].push_back(x.cc), levels[1].push_back(x.p), levels[2].push_back(x.pp), levels[3].push_back(x.cores);
  }
  for (auto& l : levels) {
    std::sort(l.begin(), l.end());
    l.erase(std::unique(l.begin(), l.end()), l.end());
  }
  // Leave one stratum out: each stratum's cases are answered by forests
  // that never saw that stratum, as a job whose stratum the table lacks.
  // Accuracy: every parameter within one of the history's levels of the
  // table's optimum. R² (FastHLA eq. 12): the throughput the predicted
  // parameters reach in the held-out stratum (its surfaces) against what
  // its optimum reaches.
  size_t good = 0;
  std::vector<double> want, got;
  for (size_t held = 0; held < t.strata.size(); ++held) {
    Cases train, test;
    for (size_t i = 0; i < all.x.size(); ++i) {
      Cases& c = all.stratum[i] == held ? test : train;
      c.x.push_back(all.x[i]), c.y.push_back(all.y[i]), c.stratum.push_back(all.stratum[i]);
    }
    if (train.x.size() < 4 || test.x.empty()) continue;
    std::array<alglib::decisionforest, 4> df = grow_all(train, seed + 100 * held);
    const TableStratum& st = t.strata[held];
    for (size_t i = 0; i < test.x.size(); ++i) {
      Knobs k = knobs_from(run_all(df, test.x[i]));
      const Knobs& opt = st.entries[i].choice.knobs;
      double kv[4] = {double(k.cc), double(k.p), double(k.pp), double(k.cores)};
      double ov[4] = {double(opt.cc), double(opt.p), double(opt.pp), double(opt.cores)};
      bool within = true;
      for (size_t o = 0; o < 4; ++o)
        within &= std::abs(position(levels[o], kv[o], o < 3) - position(levels[o], ov[o], o < 3)) <= 1.0 + 1e-9;
      good += within;
      ++r.test_cases;
      if (held < models.size()) {
        k.freq_khz = opt.freq_khz;
        want.push_back(st.entries[i].choice.mbps);
        got.push_back(models[held].throughput(k));
      }
    }
  }
  r.train_cases = all.x.size();
  r.accuracy = r.test_cases ? double(good) / double(r.test_cases) : 0;
  if (want.size() >= 2) {
    double mean = std::accumulate(want.begin(), want.end(), 0.0) / double(want.size()), ss_res = 0, ss_tot = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      ss_res += (want[i] - got[i]) * (want[i] - got[i]);
      ss_tot += (want[i] - mean) * (want[i] - mean);
    }
    r.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 0;
    r.r2_rows = want.size();
  }
  // What the table keeps: forests trained on every case.
  std::array<alglib::decisionforest, 4> df = grow_all(all, seed + 10);
  nlohmann::json forests = nlohmann::json::object();
  for (size_t o = 0; o < 4; ++o) {
    std::string ser;
    alglib::dfserialize(df[o], ser);
    forests[kOutputs[o]] = ser;
  }
  t.predictor = {{"kind", "random decision forests (ALGLIB dfbuilder), one per parameter"},
                 {"trees", kTrees},
                 {"inputs", {"log10 link Mbit/s", "log10 RTT ms", "log10(1+100 loss%)", "external load", "log10 bytes",
                             "log10 files", "log10 mean size", "log10(1+sd size)", "sla (0 throughput, 1 energy)",
                             "level"}},
                 {"outputs", {"log2 cc", "log2 p", "log2 pp", "cores"}},
                 {"forests", forests},
                 {"accuracy", r.accuracy},
                 {"test_cases", r.test_cases},
                 {"r2", r.r2},
                 {"r2_cases", r.r2_rows}};
  return r;
}

std::optional<Knobs> predict(const ParamTable& t, const Query& q) {
  if (!t.predictor.is_object() || !t.predictor.contains("forests")) return std::nullopt;
  TableStratum s;
  s.link_mbps = q.link_mbps, s.rtt_ms = q.rtt_ms, s.loss_pct = q.loss_pct, s.load_lo = s.load_hi = q.ext_load;
  s.files = q.files, s.bytes = q.bytes, s.size_mean = q.size_mean, s.size_sd = q.size_sd;
  std::vector<double> x = case_inputs(s, q.sla, q.level);
  std::array<double, 4> y{};
  try {
    for (size_t o = 0; o < 4; ++o) {
      alglib::decisionforest df;
      alglib::dfunserialize(t.predictor["forests"].at(kOutputs[o]).get<std::string>(), df);
      y[o] = run(df, x);
    }
  } catch (const std::exception&) {
    return std::nullopt;
  } catch (const alglib::ap_error&) {
    return std::nullopt;
  }
  return knobs_from(y);
}

}  // namespace xfer::hla
