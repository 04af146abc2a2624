// FastHLA step 4 (fasthla-mobile.txt §4): a learned predictor for jobs whose
// stratum the table lacks. Random decision forests (ALGLIB dfbuilder), one
// per parameter, on the table's optima; a throughput forest on the
// history's rows gives the R² of predicted against achieved throughput.
#include <libalglib/dataanalysis.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "xfer/hla.h"

namespace xfer::hla {

namespace {

constexpr int kTrees = 60;
const char* kOutputs[] = {"cc", "p", "pp", "cores"};

std::vector<double> features(double link, double rtt, double loss, double load, double files, double bytes, double mean,
                             double sd) {
  return {std::log10(std::max(link, 1e-3)), std::log10(std::max(rtt, 0.1)), std::log10(1 + 100 * loss), load,
          std::log10(std::max(files, 1.0)), std::log10(std::max(bytes, 1.0)), std::log10(std::max(mean, 1.0)),
          std::log10(1 + sd)};
}

std::vector<double> case_inputs(const TableStratum& s, const std::string& sla, double level) {
  std::vector<double> f = features(s.link_mbps, s.rtt_ms, s.loss_pct, (s.load_lo + s.load_hi) / 2, s.files, s.bytes,
                                   s.size_mean, s.size_sd);
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

}  // namespace

PredictorReport train_predictor(ParamTable& t, const std::vector<Sample>& s, uint64_t seed) {
  PredictorReport r;
  Cases all = cases_of(t);
  if (all.x.size() < 4) {
    t.predictor = nullptr;
    return r;
  }
  // Hold out 30% of the strata (all their cases), so the test asks about
  // strata the forests never saw: the predictor's job.
  std::vector<size_t> ids(t.strata.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::set<size_t> test(ids.begin(), ids.begin() + long(std::max<size_t>(1, ids.size() * 3 / 10)));
  if (test.size() >= ids.size()) test.clear();
  Cases train, held;
  for (size_t i = 0; i < all.x.size(); ++i) {
    Cases& c = test.count(all.stratum[i]) ? held : train;
    c.x.push_back(all.x[i]), c.y.push_back(all.y[i]), c.stratum.push_back(all.stratum[i]);
  }
  r.train_cases = train.x.size(), r.test_cases = held.x.size();
  if (!train.x.empty() && !held.x.empty()) {
    std::array<alglib::decisionforest, 4> df;
    for (size_t o = 0; o < 4; ++o) {
      std::vector<double> y;
      for (const auto& v : train.y) y.push_back(v[o]);
      df[o] = grow(train.x, y, seed + o);
    }
    size_t good = 0;
    for (size_t i = 0; i < held.x.size(); ++i) {
      bool within = true;
      for (size_t o = 0; o < 4; ++o) within &= std::abs(std::round(run(df[o], held.x[i])) - held.y[i][o]) <= 1.0;
      good += within;
    }
    r.accuracy = double(good) / double(held.x.size());
  }
  // What the table keeps: forests trained on every case.
  nlohmann::json forests = nlohmann::json::object();
  for (size_t o = 0; o < 4; ++o) {
    std::vector<double> y;
    for (const auto& v : all.y) y.push_back(v[o]);
    alglib::decisionforest df = grow(all.x, y, seed + 10 + o);
    std::string ser;
    alglib::dfserialize(df, ser);
    forests[kOutputs[o]] = ser;
  }

  // R²: a throughput forest on the history's rows (path, load, dataset and
  // params -> Mbit/s), held out by run.
  std::map<std::string, int> run_part;
  std::vector<std::vector<double>> tx, vx;
  std::vector<double> ty, vy;
  for (const Sample& x : s) {
    auto [it, fresh] = run_part.emplace(x.run, 0);
    if (fresh) it->second = std::uniform_real_distribution<double>(0, 1)(rng) < 0.3 ? 1 : 0;
    std::vector<double> f = features(x.link_mbps, x.rtt_ms, x.loss_pct, x.ext_load, x.files, x.bytes, x.size_mean, x.size_sd);
    for (double v : levels_of({x.cc, x.p, x.pp, x.cores, x.freq_khz})) f.push_back(v);
    (it->second ? vx : tx).push_back(f);
    (it->second ? vy : ty).push_back(x.mbps);
  }
  if (tx.size() >= 10 && vx.size() >= 2) {
    alglib::decisionforest tf = grow(tx, ty, seed + 99);
    double mean = std::accumulate(vy.begin(), vy.end(), 0.0) / double(vy.size()), ss_res = 0, ss_tot = 0;
    for (size_t i = 0; i < vx.size(); ++i) {
      double p = run(tf, vx[i]);
      ss_res += (vy[i] - p) * (vy[i] - p);
      ss_tot += (vy[i] - mean) * (vy[i] - mean);
    }
    r.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 0;
    r.r2_rows = vx.size();
  }
  t.predictor = {{"kind", "random decision forests (ALGLIB dfbuilder), one per parameter"},
                 {"trees", kTrees},
                 {"inputs", {"log10 link Mbit/s", "log10 RTT ms", "log10(1+100 loss%)", "external load",
                             "log10 files", "log10 bytes", "log10 mean size", "log10(1+sd size)", "sla (0 throughput, 1 energy)",
                             "level"}},
                 {"outputs", {"log2 cc", "log2 p", "log2 pp", "cores"}},
                 {"forests", forests},
                 {"accuracy", r.accuracy},
                 {"test_cases", r.test_cases},
                 {"r2", r.r2},
                 {"r2_rows", r.r2_rows}};
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
  Knobs k;
  k.cc = std::clamp(int(std::lround(std::exp2(y[0]))), 1, 4096);
  k.p = std::clamp(int(std::lround(std::exp2(y[1]))), 1, 64);
  k.pp = std::clamp(int(std::lround(std::exp2(y[2]))), 1, 128);
  k.cores = std::clamp(int(std::lround(y[3])), 1, 4096);
  return k;
}

}  // namespace xfer::hla
