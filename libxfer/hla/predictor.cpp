// FastHLA step 4 (fasthla-mobile.txt §4): a learned predictor for jobs whose
// stratum the table lacks. Random decision forests (ALGLIB dfbuilder), one
// per parameter, on the table's optima; judged leaving one stratum out.
#include <fmt/format.h>
#include <libalglib/dataanalysis.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "xfer/hla.h"

namespace xfer::hla {

namespace {

constexpr int kTrees = 60;
const char* kOutputs[] = {"cc", "p", "pp", "cores"};

// The two ways an SLA reaches the predictor: as a level (a share of the
// best throughput, a multiple of the least energy: max-throughput, least
// energy, a target in percent) or as an absolute bound (a floor in Mbit/s,
// a ceiling in J/GB). One set of forests for each: a floor of 40 Mbit/s is
// a different share of the best on every path, so a level cannot stand for it.
enum class Ask { Level, Bound };
constexpr const char* kModelKeys[2] = {"forests", "bound_network"};

// A stratum's load as its rows had it (the band's middle for a table that
// does not say).
double load_of(const TableStratum& s) { return s.load_mean >= 0 ? s.load_mean : (s.load_lo + s.load_hi) / 2; }

// The bound as the bound forests see it: a floor as a share of the path's
// link rate; a ceiling as log10 J/GB.
double bound_feature(const std::string& sla, double bound, double link_mbps) {
  if (sla == "energy") return std::log10(std::max(bound, 1e-3));
  return link_mbps > 0 ? bound / link_mbps : bound;
}

// A level as the forests see it: the energy ladder's (1, 1.1, ...) apart
// from the throughput ladder's (0.5 ... 1), or a split on the level at 1
// would put least energy beside most throughput.
double level_feature(const std::string& sla, double level) { return sla == "energy" ? 10 + level : level; }

// The strata's own coordinates (path, then dataset), the load between; then
// the SLA.
std::vector<double> case_inputs(const TableStratum& s, double load, const std::string& sla, double last) {
  std::vector<double> f = path_features(s.link_mbps, s.rtt_ms, s.loss_pct);
  f.push_back(load);
  for (double v : dataset_features(s.bytes, s.files, s.size_mean, s.size_sd)) f.push_back(v);
  f.push_back(sla == "energy" ? 1 : 0);
  f.push_back(last);
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
  std::vector<const TableEntry*> entry;  // the table's answer
};

// The shares of the link rate the bound forests learn floors at.
const std::vector<double> kFloorShares = {0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};

// The cases: the table's answers (choose) at the levels of the ladders
// (kThroughputLevels, kEnergyLevels); or at floors that are shares of the
// link rate and ceilings at the energy ladder's multiples, as absolute bounds.
Cases cases_of(const ParamTable& t, Ask ask) {
  Cases c;
  auto add = [&](size_t i, const std::string& sla, double last, const TableEntry* e) {
    if (!e || e->sla != sla) return;
    c.x.push_back(case_inputs(t.strata[i], load_of(t.strata[i]), sla, last));
    c.y.push_back(levels_of(e->choice.knobs));
    c.stratum.push_back(i);
    c.entry.push_back(e);
  };
  for (size_t i = 0; i < t.strata.size(); ++i) {
    const TableStratum& s = t.strata[i];
    bool met = false;
    if (ask == Ask::Level) {
      for (double level : kThroughputLevels)
        add(i, "throughput", level_feature("throughput", level), choose_level(s, "throughput", level, met));
      for (double level : kEnergyLevels)
        add(i, "energy", level_feature("energy", level), choose_level(s, "energy", level, met));
      continue;
    }
    for (double share : kFloorShares) {
      double bound = share * s.link_mbps;
      add(i, "throughput", bound_feature("throughput", bound, s.link_mbps), choose(s, "throughput", bound, met));
    }
    const TableEntry* least = choose(s, "energy", 0, met);
    if (least && least->sla == "energy")
      for (double level : kEnergyLevels) {
        double bound = level * least->bound;
        add(i, "energy", bound_feature("energy", bound, s.link_mbps), choose(s, "energy", bound, met));
      }
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

// A floor asks for at least what it names: a network's estimate of the
// least channels that reach it rounds up (`at_least`).
Knobs knobs_from(const std::array<double, 4>& y, bool at_least = false) {
  Knobs k;
  double cc = std::exp2(y[0]);
  k.cc = std::clamp(int(at_least ? std::ceil(cc - 0.05) : std::lround(cc)), 1, 4096);
  k.p = std::clamp(int(std::lround(std::exp2(y[1]))), 1, 64);
  k.pp = std::clamp(int(std::lround(std::exp2(y[2]))), 1, 128);
  k.cores = std::clamp(int(std::lround(y[3])), 1, 4096);
  return k;
}

// One of the predictor's two models: the SLA as a level -> decision forests
// (ALGLIB dfbuilder), one per parameter; as a bound -> a shallow neural
// network (ALGLIB MLP, FastHLA's ANN), whose answer moves smoothly between
// the paths it learnt (a forest answers with a neighbour's: for a floor, the
// channels of a shorter or a longer path, too few half the time).
struct Model {
  virtual ~Model() = default;
  virtual std::array<double, 4> run(const std::vector<double>& x) const = 0;
  virtual nlohmann::json save() const = 0;
};

struct Forests : Model {
  std::array<alglib::decisionforest, 4> df;
  std::array<double, 4> run(const std::vector<double>& x) const override {
    std::array<double, 4> y{};
    for (size_t o = 0; o < 4; ++o) y[o] = xfer::hla::run(df[o], x);
    return y;
  }
  nlohmann::json save() const override {
    nlohmann::json j = nlohmann::json::object();
    for (size_t o = 0; o < 4; ++o) {
      std::string ser;
      alglib::dfserialize(const_cast<alglib::decisionforest&>(df[o]), ser);
      j[kOutputs[o]] = ser;
    }
    return j;
  }
};

constexpr int kHidden = 8, kRestarts = 5;
constexpr double kDecay = 0.01;

struct Network : Model {
  alglib::multilayerperceptron net;
  std::vector<double> x_mean, x_sd;  // inputs and outputs standardised
  std::array<double, 4> y_mean{}, y_sd{};
  std::array<double, 4> run(const std::vector<double>& x) const override {
    alglib::real_1d_array in, out;
    in.setlength(alglib::ae_int_t(x.size()));
    for (size_t j = 0; j < x.size() && j < x_mean.size(); ++j) in[alglib::ae_int_t(j)] = (x[j] - x_mean[j]) / x_sd[j];
    alglib::mlpprocess(net, in, out);
    std::array<double, 4> y{};
    for (size_t o = 0; o < 4; ++o) y[o] = out[alglib::ae_int_t(o)] * y_sd[o] + y_mean[o];
    return y;
  }
  nlohmann::json save() const override {
    std::string ser;
    alglib::mlpserialize(const_cast<alglib::multilayerperceptron&>(net), ser);
    return {{"kind", "mlp"}, {"net", ser}, {"x_mean", x_mean}, {"x_sd", x_sd}, {"y_mean", y_mean}, {"y_sd", y_sd}};
  }
};

std::unique_ptr<Model> fit_model(Ask ask, const Cases& c, uint64_t seed) {
  if (ask == Ask::Level) {
    auto f = std::make_unique<Forests>();
    for (size_t o = 0; o < 4; ++o) {
      std::vector<double> y;
      for (const auto& v : c.y) y.push_back(v[o]);
      f->df[o] = grow(c.x, y, seed + o);
    }
    return f;
  }
  auto n = std::make_unique<Network>();
  size_t rows = c.x.size(), nin = rows ? c.x[0].size() : 0;
  n->x_mean.assign(nin, 0), n->x_sd.assign(nin, 0);
  for (size_t j = 0; j < nin; ++j) {
    for (const auto& x : c.x) n->x_mean[j] += x[j] / double(rows);
    for (const auto& x : c.x) n->x_sd[j] += (x[j] - n->x_mean[j]) * (x[j] - n->x_mean[j]) / double(rows);
    n->x_sd[j] = n->x_sd[j] > 1e-12 ? std::sqrt(n->x_sd[j]) : 1;
  }
  for (size_t o = 0; o < 4; ++o) {
    for (const auto& y : c.y) n->y_mean[o] += y[o] / double(rows);
    for (const auto& y : c.y) n->y_sd[o] += (y[o] - n->y_mean[o]) * (y[o] - n->y_mean[o]) / double(rows);
    n->y_sd[o] = n->y_sd[o] > 1e-12 ? std::sqrt(n->y_sd[o]) : 1;
  }
  alglib::real_2d_array xy;
  xy.setlength(alglib::ae_int_t(rows), alglib::ae_int_t(nin + 4));
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < nin; ++j) xy[alglib::ae_int_t(i)][alglib::ae_int_t(j)] = (c.x[i][j] - n->x_mean[j]) / n->x_sd[j];
    for (size_t o = 0; o < 4; ++o) xy[alglib::ae_int_t(i)][alglib::ae_int_t(nin + o)] = (c.y[i][o] - n->y_mean[o]) / n->y_sd[o];
  }
  alglib::mlpcreate1(alglib::ae_int_t(nin), kHidden, 4, n->net);
  // ALGLIB draws the starting weights of its restarts from the C library's
  // generator: seeded, the same table comes out of the same history.
  std::srand(unsigned(seed % 2147483647u) + 1u);
  alglib::ae_int_t info = 0;
  alglib::mlpreport rep;
  alglib::mlptrainlm(n->net, xy, alglib::ae_int_t(rows), kDecay, kRestarts, info, rep);
  return n;
}

std::unique_ptr<Model> load(Ask ask, const nlohmann::json& j) {
  if (ask == Ask::Level) {
    auto f = std::make_unique<Forests>();
    for (size_t o = 0; o < 4; ++o) alglib::dfunserialize(j.at(kOutputs[o]).get<std::string>(), f->df[o]);
    return f;
  }
  auto n = std::make_unique<Network>();
  alglib::mlpunserialize(j.at("net").get<std::string>(), n->net);
  n->x_mean = j.at("x_mean").get<std::vector<double>>();
  n->x_sd = j.at("x_sd").get<std::vector<double>>();
  n->y_mean = j.at("y_mean").get<std::array<double, 4>>();
  n->y_sd = j.at("y_sd").get<std::array<double, 4>>();
  if (n->x_mean.size() != n->x_sd.size() || alglib::mlpgetinputscount(n->net) != alglib::ae_int_t(n->x_mean.size()) ||
      alglib::mlpgetoutputscount(n->net) != 4)
    throw std::runtime_error("the network's shape does not match its scaling");
  for (double v : n->x_sd)
    if (!(v > 0)) throw std::runtime_error("a scale of zero");
  for (double v : n->y_sd)
    if (!(v > 0)) throw std::runtime_error("a scale of zero");
  return n;
}

}  // namespace

PredictorReport train_predictor(ParamTable& t, const std::vector<StratumModel>& models, const std::vector<Sample>& s,
                                uint64_t seed) {
  PredictorReport r;
  std::array<Cases, 2> all = {cases_of(t, Ask::Level), cases_of(t, Ask::Bound)};
  if (all[0].x.size() < 4 || t.strata.size() < 2) {
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
  // its optimum reaches. Both sets of forests (levels and bounds) are judged.
  size_t good = 0;
  std::array<size_t, 2> good_of{}, cases_of_kind{};
  std::vector<double> want, got;
  for (size_t a = 0; a < 2; ++a)
    for (size_t held = 0; held < t.strata.size(); ++held) {
      Cases train, test;
      for (size_t i = 0; i < all[a].x.size(); ++i) {
        Cases& c = all[a].stratum[i] == held ? test : train;
        c.x.push_back(all[a].x[i]), c.y.push_back(all[a].y[i]), c.stratum.push_back(all[a].stratum[i]);
        c.entry.push_back(all[a].entry[i]);
      }
      if (train.x.size() < 4 || test.x.empty()) continue;
      std::unique_ptr<Model> model = fit_model(Ask(a), train, seed + 100 * held + 7 * a);
      for (size_t i = 0; i < test.x.size(); ++i) {
        Knobs k = knobs_from(model->run(test.x[i]));
        const Knobs& opt = test.entry[i]->choice.knobs;
        double kv[4] = {double(k.cc), double(k.p), double(k.pp), double(k.cores)};
        double ov[4] = {double(opt.cc), double(opt.p), double(opt.pp), double(opt.cores)};
        bool within = true;
        for (size_t o = 0; o < 4; ++o)
          within &= std::abs(position(levels[o], kv[o], o < 3) - position(levels[o], ov[o], o < 3)) <= 1.0 + 1e-9;
        good += within;
        ++r.test_cases;
        good_of[a] += within, cases_of_kind[a] += 1;
        if (held < models.size() && models[held].fitted && t.strata[held].decided == "surfaces") {
          k.freq_khz = opt.freq_khz;
          want.push_back(test.entry[i]->choice.mbps);
          got.push_back(models[held].bounded_throughput(k));  // as the table's figures are
        }
      }
    }
  r.train_cases = all[0].x.size() + all[1].x.size();
  r.accuracy = r.test_cases ? double(good) / double(r.test_cases) : 0;
  r.accuracy_level = cases_of_kind[0] ? double(good_of[0]) / double(cases_of_kind[0]) : 0;
  r.accuracy_bound = cases_of_kind[1] ? double(good_of[1]) / double(cases_of_kind[1]) : 0;
  if (want.size() >= 2) {
    double mean = std::accumulate(want.begin(), want.end(), 0.0) / double(want.size()), ss_res = 0, ss_tot = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      ss_res += (want[i] - got[i]) * (want[i] - got[i]);
      ss_tot += (want[i] - mean) * (want[i] - mean);
    }
    r.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 0;
    r.r2_rows = want.size();
    std::vector<double> lost;
    for (size_t i = 0; i < want.size(); ++i) lost.push_back(want[i] > 0 ? std::max(0.0, 1 - got[i] / want[i]) : 0);
    std::nth_element(lost.begin(), lost.begin() + long(lost.size() / 2), lost.end());
    r.regret = lost[lost.size() / 2];
  }
  // The strata it learns from: each path and dataset input's range (what
  // predict() serves within).
  std::vector<double> lo, hi;
  for (const std::vector<double>& x : all[0].x) {
    if (lo.empty()) lo = hi = x;
    for (size_t i = 0; i < x.size(); ++i) lo[i] = std::min(lo[i], x[i]), hi[i] = std::max(hi[i], x[i]);
  }
  // What the table keeps: forests trained on every case, and the load a
  // job is asked at before it has measured one (the strata's median).
  std::vector<double> loads, links;
  for (const TableStratum& st : t.strata) loads.push_back(load_of(st)), links.push_back(st.link_mbps);
  std::nth_element(loads.begin(), loads.begin() + long(loads.size() / 2), loads.end());
  std::nth_element(links.begin(), links.begin() + long(links.size() / 2), links.end());
  t.predictor = {{"kind", "SLA as a level: random decision forests (ALGLIB dfbuilder), one per parameter; as a bound: a neural network (ALGLIB MLP, one hidden layer)"},
                 {"trees", kTrees},
                 {"inputs", {"log10 link Mbit/s", "log10 RTT ms", "log10(1+100 loss%)", "external load", "log10 bytes",
                             "log10 files", "log10 mean size", "log10(1+sd size)", "sla (0 throughput, 1 energy)",
                             "forests: level (energy's + 10); bound_network: floor / link Mbit/s, or log10 ceiling J/GB"}},
                 {"outputs", {"log2 cc", "log2 p", "log2 pp", "cores"}},
                 {"typical_load", loads[loads.size() / 2]},
                 {"typical_link_mbps", links[links.size() / 2]},
                 {"accuracy", r.accuracy},
                 {"accuracy_level", r.accuracy_level},
                 {"accuracy_bound", r.accuracy_bound},
                 {"test_cases", r.test_cases},
                 {"r2", r.r2},
                 {"r2_cases", r.r2_rows},
                 {"regret", r.regret},
                 {"inputs_lo", lo},
                 {"inputs_hi", hi}};
  for (size_t a = 0; a < 2; ++a) {
    if (all[a].x.size() < 4) continue;
    t.predictor[kModelKeys[a]] = fit_model(Ask(a), all[a], seed + 10 + a)->save();
  }
  return r;
}

namespace {

// The inputs predict() reads for q (case_inputs), with the link and load a
// job has not measured yet taken as the strata's median.
std::vector<double> query_inputs(const ParamTable& t, const Query& q, Ask ask) {
  TableStratum s;
  // A link rate not known yet: the strata's median; a loss not known: none.
  double link = q.link_mbps;
  if (link <= 0) {
    const nlohmann::json& typical = t.predictor.contains("typical_link_mbps") ? t.predictor["typical_link_mbps"] : nlohmann::json();
    link = typical.is_number() ? typical.get<double>() : 1000;
  }
  s.link_mbps = link, s.rtt_ms = q.rtt_ms, s.loss_pct = std::max(0.0, q.loss_pct);
  s.files = q.files, s.bytes = q.bytes, s.size_mean = q.size_mean, s.size_sd = q.size_sd;
  double ext = q.ext_load;
  if (ext < 0) {
    const nlohmann::json& typical = t.predictor.contains("typical_load") ? t.predictor["typical_load"] : nlohmann::json();
    ext = typical.is_number() ? typical.get<double>() : 0;
  }
  double last = ask == Ask::Bound ? bound_feature(q.sla, q.bound, link) : level_feature(q.sla, q.level);
  return case_inputs(s, ext, q.sla, last);
}

// The path's and the dataset's inputs (case_inputs: 0-2 and 4-7).
constexpr size_t kReachInputs[] = {0, 1, 2, 4, 5, 6, 7};
constexpr const char* kInputNames[] = {"link rate", "RTT", "loss", "load", "bytes", "files", "mean file size", "file size spread"};

}  // namespace

bool predictor_record_serves(double r2, size_t cases) { return cases >= kServeCases && r2 >= kServeR2; }

std::optional<Knobs> predict(const ParamTable& t, const Query& q, std::string* why) {
  auto no = [&](std::string reason) -> std::optional<Knobs> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  const Ask ask = q.bound > 0 ? Ask::Bound : Ask::Level;
  if (!t.predictor.is_object() || !t.predictor.contains(kModelKeys[size_t(ask)])) return no("the table has no predictor");
  const nlohmann::json& p = t.predictor;
  const double r2 = p.contains("r2") && p["r2"].is_number() ? p["r2"].get<double>() : -1e9;
  const double counted = p.contains("r2_cases") && p["r2_cases"].is_number() ? p["r2_cases"].get<double>() : 0;
  const size_t cases = counted > 0 ? size_t(std::min(counted, 1e9)) : 0;  // (a table is a file: any number)
  if (!predictor_record_serves(r2, cases))
    return no(cases < kServeCases ? fmt::format("its held-out R² rests on {} case{} (it is served from {})", cases,
                                                cases == 1 ? "" : "s", kServeCases)
                                  : fmt::format("its held-out R² is {:.2f}, under {:.2f}", r2, kServeR2));
  if (p.contains("inputs_lo") && p.contains("inputs_hi") && p["inputs_lo"].is_array() && p["inputs_hi"].is_array()) {
    const std::vector<double> x = query_inputs(t, q, ask);
    const nlohmann::json &lo = p["inputs_lo"], &hi = p["inputs_hi"];
    for (size_t i : kReachInputs) {
      if (i >= x.size() || i >= lo.size() || i >= hi.size() || !lo[i].is_number() || !hi[i].is_number()) continue;
      if (x[i] < lo[i].get<double>() - kServeReach || x[i] > hi[i].get<double>() + kServeReach)
        return no(fmt::format("the job's {} lies outside the strata it was trained on", kInputNames[i]));
    }
  }
  return predictor_answer(t, q);
}

std::optional<Knobs> predictor_answer(const ParamTable& t, const Query& q) {
  Ask ask = q.bound > 0 ? Ask::Bound : Ask::Level;
  const char* set = kModelKeys[size_t(ask)];
  if (!t.predictor.is_object() || !t.predictor.contains(set)) return std::nullopt;
  std::vector<double> x = query_inputs(t, q, ask);
  std::array<double, 4> y{};
  try {
    y = load(ask, t.predictor[set])->run(x);
    return knobs_from(y, ask == Ask::Bound && q.sla == "throughput");
  } catch (const std::exception&) {
    return std::nullopt;
  } catch (const alglib::ap_error&) {
    return std::nullopt;
  }
  return knobs_from(y);
}

}  // namespace xfer::hla
