// The offline analysis of Cross-LayerHLA (cross-layer-hla.txt §III-A, §III-B;
// FastHLA, fasthla-mobile.txt §4 steps 1-5): history -> preprocessed rows ->
// strata -> spline surfaces -> SLA optima -> the parameter table (and a
// learned predictor for jobs whose stratum the table lacks). xfer-hla
// analyze drives it; xferd and xferctl load the table.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "xfer/history.h"

namespace xfer::hla {

// ---- step 1: preprocessing --------------------------------------------------

// One usable interval of one chunk: the run's path and the chunk's dataset,
// its parameters and what they achieved.
struct Sample {
  std::string run;
  int64_t chunk = 0;
  std::string path;     // "origin host -> receiving host" (the run's, or a folded row's)
  double t_unix = 0;    // the end of its newest interval
  double link_mbps = 0, rtt_ms = 0, loss_pct = 0;
  double files = 0, bytes = 0, size_mean = 0, size_sd = 0;  // the chunk's dataset
  double ext_load = 0;  // the run's median share of the link that was not ours
  int cc = 1, p = 1, pp = 1, cores = 1;
  long freq_khz = 0;  // 0: not set (no driver)
  double mbps = 0;                 // the chunk's throughput
  std::optional<double> j_per_gb;  // its energy per GB (its share of the machine's)
  double gb = 0;                   // what it moved
  int intervals = 1;               // the measured intervals averaged into it
  // How long the setting was held (the measured intervals' time): the
  // sample's weight. A long everyday job at one setting is one sample of
  // low noise, a sweep's visit of two intervals one of high noise; the
  // surfaces and the measured optima weigh them so.
  double seconds = 0;
  double mbps_sd = 0;  // its intervals' throughput sd (time-weighted; 0 with one interval): its own confidence
  bool explored = false;  // an online tuner's exploration trial (its rows' reason holds kExploreTag)
};

// What an hla tuner's reason says while it tries a setting (exploration):
// the history's rows of a trial are told from the others by it, so that
// the budget for trials is kept per stratum across jobs.
inline constexpr std::string_view kExploreTag = ": explore (";
// What the recorder adds to the reason of an interval that held a one-off
// of the measuring (Observation::one_off_cpu_s: the flow monitor's load):
// the analysis keeps its row out of the samples, as it does a settling one.
inline constexpr std::string_view kOneOffTag = " [a one-off of the measuring: no setting's energy]";

struct RuleCount {
  std::string rule;
  size_t removed = 0;
};
struct Preprocessed {
  std::vector<Sample> samples;  // one per visit of a run's chunk to a setting: its measured intervals averaged
  size_t input = 0;
  size_t kept = 0;  // interval rows left after the rules
  // Settling or partial rows kept after all: a finished run's chunk that had
  // no other (a short job's only figures). Not in the rules' counts.
  size_t reinstated = 0;
  size_t folded = 0;  // samples from folded rows (hla_folded), after those of the rows
  std::vector<RuleCount> rules;  // in the order applied
};
// A path as its jobs measured it: runs between the same two hosts are one
// path (path_key). Each job's link rate is the most the interfaces received
// while it ran, which a job at two channels puts far below what the link
// carries, and its loss is a few seconds' count: the path's link rate is the
// most any of its done runs measured, its loss their median (measured
// figures only; a configured one stays its run's), its RTT the median of
// their handshakes. The analysis's strata sit on these figures (preprocess),
// the table keeps them (ParamTable::paths), and a job on a known path starts
// from them where nothing is configured (start_from_path): its BDP, its
// start estimates and its place in the table.
struct PathFacts {
  std::string path;        // "origin host -> receiving host"
  double link_mbps = 0;    // 0: no run measured it
  double rtt_ms = 0;       // 0: not known
  double loss_pct = -1;    // -1: no run measured it
  size_t runs = 0;         // the done runs behind the figures
  double newest_unix = 0;  // when the newest of them ended
};
// "HOST -> DEST_HOST" for an origin (scheme://host:port, an IPv6 literal in
// brackets); "" when the origin names no host.
std::string path_key(const std::string& origin, const std::string& dest_host);
// Every path of the history's done runs (the runs whose origin names no
// host are left out), by path.
std::vector<PathFacts> path_facts(const HistoryData& h);

// Drops, and counts: rows of runs that did not end done; settling intervals;
// partial intervals; intervals that moved nothing; throughput above the
// link rate; outliers (modified z-score > 3.5 of throughput or energy per
// GB among rows of the same run, chunk and parameters, Iglewicz-Hoaglin).
// The rows left are then averaged per visit (a stretch of one run's chunk
// at the same parameters; throughput over time, energy over bytes): one
// sample per setting a transfer held, as the papers' logs have one entry
// per transfer. A sweep that comes back to a setting gives a second sample.
Preprocessed preprocess(const HistoryData& h);
// A folded row (history.h, compact()) as one sample: its figures averaged
// over its weighted time, its weight that time.
Sample folded_sample(const FoldedRow& f);

// ---- step 2: strata -----------------------------------------------------------

// Hierarchical agglomerative clustering with unweighted average linkage
// (UPGMA: ALGLIB's clusterizer, AHC algorithm 2, Euclidean distance),
// cut where the merge distance passes `cut`. merges[i] joins clusters a and
// b (ids < n: points; n + j: the cluster of merge j) at heights[i].
struct Dendrogram {
  std::vector<std::array<int, 2>> merges;
  std::vector<double> heights;
  std::vector<int> cluster;  // per point: its cluster after the cut (0..k-1, in order of first point)
  int k = 0;
};
Dendrogram upgma(const std::vector<std::vector<double>>& points, double cut);

struct Stratum {
  std::string id;            // "P1/D2/L1"
  double link_mbps = 0, rtt_ms = 0, loss_pct = 0;            // tier 1: the path (centroid)
  double files = 0, bytes = 0, size_mean = 0, size_sd = 0;  // tier 2: dataset centroid
  double load_lo = 0, load_hi = 1;                            // tier 3: external load band
  std::vector<size_t> rows;  // indices into the samples
};
struct Strata {
  std::vector<Stratum> strata;
  std::string tree;  // the tiers as an indented text tree with sizes
};
// The tiers' coordinates and cuts (stratify clusters by them; the
// parameter cache matches a job against the table's centroids by them).
std::vector<double> path_features(double link_mbps, double rtt_ms, double loss_pct);
std::vector<double> dataset_features(double bytes, double files, double size_mean, double size_sd);
constexpr double kPathCut = 0.15, kDatasetCut = 1.0;
// Tier 1: UPGMA on path_features (log10 link rate, log10 RTT,
// log10(1 + 100 x loss%)), cut kPathCut; tier 2: UPGMA on the chunks'
// dataset_features (log10 bytes, log10 files, log10 mean size,
// log10(1 + 100 sd / mean)), cut kDatasetCut; tier 3: bands of external load
// with boundaries at mean -/+ sd/2 of the tier-2 cluster's loads (one band
// when sd < 0.02), a band with fewer than min_rows rows joins its neighbour.
Strata stratify(const std::vector<Sample>& s, size_t min_rows = 12);

// ---- step 3: surfaces -----------------------------------------------------------

// A natural cubic spline curve (ALGLIB spline1d, zero second derivative at
// the ends) or a bicubic spline surface (spline2d) over one or two
// parameters, in log2 for cc / p / pp and linear for cores / freq; a
// constant where the history has one level.
class Surface {
 public:
  enum class Kind { Constant, Curve, Surface };
  // xs: one or two coordinates per row (already transformed); y: values;
  // w: the rows' weights (empty: equal). Each knot takes its rows' weighted mean.
  void fit(const std::vector<std::array<double, 2>>& xs, const std::vector<double>& y, int dims,
           const std::vector<double>& w = {});
  double operator()(double x, double y = 0) const;
  // Gradient and Hessian (2x2; the unused dimension zero).
  void derivatives(double x, double y, std::array<double, 2>& g, std::array<double, 4>& h) const;
  Kind kind() const { return kind_; }
  int dims() const { return dims_; }
  const std::vector<double>& levels(int d) const { return levels_[d]; }
  double lo(int d) const { return levels_[d].empty() ? 0 : levels_[d].front(); }
  double hi(int d) const { return levels_[d].empty() ? 0 : levels_[d].back(); }

  struct Extremum {
    double x = 0, y = 0, value = 0;
    bool minimum = false;  // else a maximum (Hessian positive / negative definite)
  };
  // Interior local extrema: a grid scan, Newton refinement, and the second
  // derivative test (Eigen's eigenvalues of the Hessian); saddles dropped.
  std::vector<Extremum> extrema() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  Kind kind_ = Kind::Constant;
  int dims_ = 1;
  double constant_ = 0;
  std::array<std::vector<double>, 2> levels_;
};

// The parameters as the table has them.
struct Knobs {
  int cc = 1, p = 1, pp = 1, cores = 1;
  long freq_khz = 0;  // 0: leave it
  bool operator==(const Knobs&) const = default;
  // What xferd can set: the table reader refuses anything else, and the
  // analysis drops history rows outside it (a damaged or forged history).
  static constexpr int kMaxCc = 4096, kMaxP = 64, kMaxPp = 128, kMaxCores = 4096;
  static constexpr double kMaxFreqKhz = 1e8;  // 100 GHz
  static bool possible(int64_t cc, int64_t p, int64_t pp, int64_t cores, int64_t freq_khz) {
    return cc >= 1 && cc <= kMaxCc && p >= 1 && p <= kMaxP && pp >= 1 && pp <= kMaxPp && cores >= 1 &&
           cores <= kMaxCores && freq_khz >= 0 && double(freq_khz) <= kMaxFreqKhz;
  }
};

// The settings a stratum's history holds, each with what its visits
// measured: throughput over their time, J/GB over their bytes, and how far
// they scatter (the sd between visits; with one visit, within its intervals).
struct MeasuredSetting {
  Knobs knobs;
  size_t visits = 0;
  double seconds = 0, gb = 0;
  double mbps = 0, mbps_sd = 0;
  double j_per_gb = 0;  // 0: no energy figures
};
std::vector<MeasuredSetting> measured_settings(const std::vector<Sample>& s, const std::vector<size_t>& rows);

// Per stratum, for throughput (Mbit/s) and energy (J/GB): three surfaces
// each, s1(cores, freq), s2(cc, p), s3(pp) (eq. 3-9), over the value's
// logarithm and combined there (value = exp(mean + sum of each surface's
// deviation from the mean): the product of the three surfaces' factors, so
// that throughput can grow with cc x pp), fitted by backfitting so that a
// sweep that is not a full grid still separates them. Each surface holds
// the log of the value with the other two at their mean (exp of it is the
// surface as the paper draws it: plots.cpp).
struct StratumModel {
  double mean_t = 0, mean_e = 0;  // the rows' weighted mean of log Mbit/s and log J/GB
  bool has_energy = false;
  std::array<Surface, 3> t, e;
  std::array<double, 3> t_off{}, e_off{};  // each surface's mean over the training rows (its deviation's zero)
  // RMSE on the held-out rows: per surface, at its own points (how far the
  // surface is from what the held-out rows say there, the other surfaces'
  // factors divided out), in log units (a relative error); and of the whole
  // model per row, relative to the rows' mean.
  std::array<double, 3> rmse_t{}, rmse_e{};
  double rmse_t_rows = 0, rmse_e_rows = 0;
  size_t train_rows = 0, test_rows = 0;
  // The floor under those: how far repeated visits to one setting scatter
  // (pooled within-setting sd over the stratum's mean; 0 when no setting
  // was visited twice). A held-out row cannot be predicted better than
  // this, whatever the surfaces.
  double repeat_t = 0, repeat_e = 0;
  bool one_frequency = true;  // s1 is a curve over cores
  bool fitted = false;        // false: too few rows; nothing below is set

  // Where the additive parts meet at settings never measured together, the
  // sum can pass what is possible: throughput stops at the link rate, and
  // energy at the least the stratum's transfers ever needed.
  double t_cap = 0, e_floor = 0;  // 0: none
  // The least throughput a training row measured. A setting the sum puts
  // below it lies where the history has nothing (the sum's parts met there
  // by extrapolation); candidates() leaves it out, as its J/GB would be a
  // figure for bytes that no measurement moved.
  double t_floor = 0;
  // The settings the stratum's rows measured (each once). The surfaces are
  // trusted within kNearMeasured of them only: fitted to a dozen rows, a
  // product of surfaces can put a corner no row came near at the link rate
  // (hla-learning-115face, round 4: cc 1 p 2 pp 1 at 350 Mbit/s, whose
  // neighbours measured 11-221). A setting further out is for a job's
  // trials to measure, not for the table to promise.
  std::vector<MeasuredSetting> measured;
  double throughput(const Knobs& k) const;
  // throughput(k), held to what the measured settings allow. A request in
  // flight (cc x p x pp) moves no faster when more share the path (each
  // one's bytes still take their round trips), so k's throughput per
  // request is put no higher than the fastest per request among the
  // measured settings with as many requests in flight or fewer (the
  // fastest: how cc, p and pp share the requests changes what each moves,
  // and a measured setting is never put below itself); below every
  // measured count, than the fastest of all. Both times the repeat scatter
  // (at least kTie). The surfaces had put 1x2x1 at 350 Mbit/s
  // where 2x1x1 (two requests too) measured 11 (hla-learning-a9e0719,
  // round 4), and 1x1x1 at 218 where no request had moved faster than 7
  // (hla-learning-5756485, round 3); both jobs then ran at 17-31. What
  // eq. 10 / 11 are solved on; the surfaces' fit is judged on their own
  // figure.
  double bounded_throughput(const Knobs& k) const;
  double energy(const Knobs& k) const;
  // What a GB costs as bytes and time, fitted (least squares, no cost below
  // zero, weighted by the rows' seconds) over the stratum's rows:
  // J/GB = per_gb + (per_s + per_conn_s x cc x p) x 8000 / Mbit/s (the
  // seconds a GB takes at that rate). The rows of hla-learning-fb4acd7's
  // html stratum read so: 2x1x1 at 11 Mbit/s 690 J/GB, 8x1x1 at 44 550,
  // 1x1x31 at 222 365. `fitted` false: fewer than kMinTimeCostSettings
  // measured settings, or no energy figures.
  struct TimeCost {
    double per_gb = 0, per_s = 0, per_conn_s = 0;
    size_t settings = 0;  // the measured settings it rests on
    bool fitted = false;
  };
  TimeCost time_cost;
  // energy(k) where the bound keeps k's throughput: the surfaces' figure is
  // for bytes moved at throughput(k). Where bounded_throughput(k) cuts it,
  // the same bytes take longer, and each added second costs what
  // time_cost says (per_s + per_conn_s x channels); with no fitted time
  // cost, the whole figure scales with the time (the most a cut can add).
  // The surfaces' clamp at e_floor had put 1x1x1 at the least J/GB at 9.7
  // Mbit/s where 2x1x1 measured 690 at 11 (hla-learning-fb4acd7, round 3),
  // and round 4's hla-energy ran there at 0.33x min-energy's throughput.
  double bounded_energy(const Knobs& k) const;
  // The coordinates of surface i (0: cores, GHz; 1: log2 cc, log2 p; 2: log2 pp).
  static std::array<double, 2> coords(int i, const Knobs& k);
};
constexpr size_t kMinTimeCostSettings = 3;
// The time cost over `rows` (StratumModel::TimeCost).
StratumModel::TimeCost fit_time_cost(const std::vector<Sample>& s, const std::vector<size_t>& rows);
// Fits on a seeded 70% of the stratum's rows; tests on the other 30%.
StratumModel fit_stratum(const std::vector<Sample>& s, const std::vector<size_t>& rows, uint64_t seed = 1);

// ---- step 4: the SLA optimisation (eq. 10, 11) -----------------------------------

struct Choice {
  Knobs knobs;
  double mbps = 0, j_per_gb = 0;
  bool feasible = false;
};
// Candidates: every whole value of cc, p, pp and cores between the least and
// the greatest the history has (evenly spread in the surfaces' coordinate
// when there are more than fit in kMaxCandidates settings), the history's
// own levels and frequencies, and the surfaces' interior extrema rounded to
// whole values; those further than kNearMeasured from every setting the
// stratum measured, and those predicted below t_floor, are left out (unless
// that leaves none).
constexpr size_t kMaxCandidates = 60000;
// How far a setting lies from a measured one: the sum over cc, p, pp, cores
// and frequency of |log2| of their ratio (one doubling of one knob is 1).
double knob_distance(const Knobs& a, const Knobs& b);
constexpr double kNearMeasured = 1.0;
std::vector<Knobs> candidates(const StratumModel& m);
// eq. 10: least energy with throughput >= t_sla; eq. 11: most throughput
// with energy <= e_sla. Settings whose objective is within kTie of the best
// are taken as equal (the surfaces cannot tell them apart) and the cheapest
// wins: fewest channels (cc x p), then cores, then pp, then frequency, so a
// flat optimum gives the same answer in similar strata. Infeasible: the
// closest (most throughput / least energy), feasible = false.
constexpr double kTie = 0.05;
Choice least_energy(const StratumModel& m, const std::vector<Knobs>& c, double t_sla_mbps);
Choice most_throughput(const StratumModel& m, const std::vector<Knobs>& c, double e_sla_j_per_gb);
// The candidates with their predicted throughput and energy.
std::vector<Choice> evaluate(const StratumModel& m, const std::vector<Knobs>& c);

// ---- the parameter table ----------------------------------------------------------

constexpr int kTableVersion = 2;  // 2: entries at every step of eq. 10 / 11; load_mean; two predictors
constexpr const char* kTableFormat = "xferd-hla-table";

class TableError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TableEntry {
  std::string sla;       // "throughput" (eq. 10: least energy at T >= bound) | "energy" (eq. 11: most T at E <= bound)
  double level = 0;      // the bound as a share of the stratum's best throughput, or a multiple of its least energy
  double bound = 0;      // the SLA in absolute terms: Mbit/s, or J/GB
  Choice choice;
};
// eq. 10 and eq. 11 solved at every bound at once: the answer of each is a
// step function of its bound (it changes only where the bound passes a
// candidate's predicted throughput, or energy), and these are its steps.
// "throughput" entries rise with the floor: each answers every floor above
// the previous entry's bound up to its own (choose() takes the first whose
// bound reaches the floor), as least_energy() would; "energy" entries rise
// with the ceiling: each answers every ceiling from its bound up to the
// next's, as most_throughput() would. level: the bound over the stratum's
// best throughput, or over its least energy.
struct StratumModel;
std::vector<TableEntry> sla_entries(const StratumModel& m, const std::vector<Knobs>& c);
// The same steps over settings whose figures are given (the measured ones:
// the empirical optimum of each bound among what the history tried).
std::vector<TableEntry> sla_entries(const std::vector<Choice>& all, bool has_energy);

// Whether a stratum's surfaces are trusted for its entries: the whole
// model's held-out throughput RMSE within kTrustScatter x the repeat
// scatter (what a held-out row cannot be predicted better than), or within
// kTrustRmse when nothing was repeated or the scatter is smaller. A
// stratum whose surfaces are not trusted, or with too few rows to fit
// them, takes its entries from its measured settings.
constexpr double kTrustScatter = 2.0, kTrustRmse = 0.15;
// Nor are surfaces that put a well-measured setting (two visits, or
// kWellMeasuredS seconds) further than kMeasuredMiss of its measured
// throughput from it (and 3 of its sd).
constexpr double kWellMeasuredS = 2.0, kMeasuredMiss = 0.5;

struct TableStratum {
  std::string id;
  double link_mbps = 0, rtt_ms = 0, loss_pct = 0;
  double files = 0, bytes = 0, size_mean = 0, size_sd = 0;
  double load_lo = 0, load_hi = 1;
  double load_mean = -1;  // the mean external load of its rows (-1: not known; the band's middle)
  size_t rows = 0;
  bool one_frequency = true;
  std::array<double, 3> rmse_t{}, rmse_e{};
  double rmse_t_rows = 0, rmse_e_rows = 0;
  double repeat_t = 0;  // the repeat scatter of its throughput (StratumModel::repeat_t; 0: none measured)
  // The time its samples held their settings, and of it the exploration
  // trials' (Sample::explored): the tuner's budget for trials is a share of
  // the stratum's time over every job, not of one job's.
  double seconds = 0, explored_s = 0;
  // How the entries were decided: "surfaces" (eq. 10 / 11 over the fitted
  // surfaces) or "measured" (over the settings the history tried, with
  // their measured figures), and why, in words.
  std::string decided = "surfaces";
  std::string why;
  std::vector<MeasuredSetting> measured;  // what the history tried here (the online tuner explores around it)
  std::vector<TableEntry> entries;
};
struct ParamTable {
  int version = kTableVersion;
  double generated_unix = 0;
  std::string history;  // where it was learnt from
  size_t rows_used = 0;
  std::vector<TableStratum> strata;
  nlohmann::json predictor;  // the serialized predictor and its figures (null: none)
  std::vector<PathFacts> paths;  // the history's paths (path_facts), at most kMaxTablePaths
};
constexpr size_t kMaxTablePaths = 10000;  // the most recently used, when the history has more
// The table's figures for the path from `origin` to `dest_host`; nullptr: not known.
const PathFacts* find_path(const ParamTable& t, const std::string& origin, const std::string& dest_host);

nlohmann::json to_json(const ParamTable& t);
// Checks everything (format, version, types, ranges); throws TableError
// naming what is wrong.
ParamTable table_from_json(const nlohmann::json& j);
// Writes to PATH.tmp, syncs, renames: never half a table at PATH.
void save_table(const ParamTable& t, const std::string& path);
// Parses (nested at most kMaxNesting deep: xfer/nesting.h) and checks;
// TableError naming `what`.
ParamTable table_from_text(std::string_view text, const std::string& what);
// Reads (at most 64 MiB, a regular file that root owns and others cannot
// change: require_trusted()) and checks; TableError with the path.
ParamTable load_table(const std::string& path);
// A one-line description ("N strata, M entries, from HISTORY, version V").
std::string describe(const ParamTable& t);
// The strata a table knows, for people: "P1/D1/L1 350 Mbit/s 70 ms 0.015%
// loss, 400 files of 1.0 MB, load 0.00-1.00: 8 measured settings; ..."
// (the first `most`, then how many more).
std::string known_strata(const ParamTable& t, size_t most = 6);

// ---- FastHLA step 4: the learned predictor ------------------------------------------

struct PredictorReport {
  size_t train_cases = 0, test_cases = 0;
  double accuracy = 0;   // share of held-out cases whose params are all within one of the history's levels
  // The same for each model: the forests (SLA as a level), the network (as a bound).
  double accuracy_level = 0, accuracy_bound = 0;
  double r2 = 0;         // FastHLA eq. 12: throughput of the predicted params against the optimum's
  size_t r2_rows = 0;    // the cases behind it
  // Regret: the median over those cases of the throughput the optimum's
  // setting reaches that the predicted one gives up (1 - got / optimum's, 0 at least).
  double regret = 0;
};
// Trains decision forests (ALGLIB dfbuilder), one per parameter, on the
// table's answers (inputs: path, the stratum's mean load, dataset, SLA kind
// and the SLA; outputs: the params), twice: with the SLA as a level of the
// ladders (kThroughputLevels, kEnergyLevels) and as an absolute bound (floors
// at shares of the link rate, ceilings in J/GB). Judged leaving one stratum out: each stratum's cases answered
// by forests that never saw it; a case is accurate when every parameter is
// within one of the history's levels (the samples') of the table's optimum;
// R² compares the throughput the predicted params reach on the held-out
// stratum's surfaces (models[i] is t.strata[i]'s) with its optimum's.
// The table gets the forests trained on every case.
PredictorReport train_predictor(ParamTable& t, const std::vector<StratumModel>& models, const std::vector<Sample>& s,
                                uint64_t seed = 1);

struct Query {
  double link_mbps = 0, rtt_ms = 0;  // link_mbps <= 0: not known (lookup matches the path without it)
  double loss_pct = 0;               // < 0: not known (likewise)
  double ext_load = 0;  // < 0: not measured yet (the predictor takes its strata's median)
  double files = 0, bytes = 0, size_mean = 0, size_sd = 0;
  std::string sla = "throughput";
  double level = 0.9;  // the SLA as a level (bound == 0)
  double bound = 0;    // or as an absolute floor (Mbit/s) or ceiling (J/GB): the bound forests
};
// The predictor is served only where it has shown it can be (issue 55: it
// was served at a held-out R² of 0.23, and -3.6 on an everyday history):
// its held-out R² (train_predictor) at least kServeR2 over kServeCases
// cases at least, and the job's path and dataset within the strata it was
// trained on (each input within kServeReach, in its log10 scale, of their
// range). Otherwise the formulas start the job.
constexpr double kServeR2 = 0.5;
constexpr size_t kServeCases = 4;
constexpr double kServeReach = 0.15;
// The record part of that rule (train_predictor's held-out R² and its cases).
bool predictor_record_serves(double r2, size_t cases);
// The served answer; nullopt when the table has no predictor (or none for
// the way the SLA is asked), or it is not to be served (why, into *why).
std::optional<Knobs> predict(const ParamTable& t, const Query& q, std::string* why = nullptr);
// The predictor's answer whatever its record (to judge it).
std::optional<Knobs> predictor_answer(const ParamTable& t, const Query& q);

// ---- FastHLA's parameter cache: the table's strata for a job ------------------

// A job's (chunk's) place in the table: the strata of its path and dataset,
// one per external-load band, lightest first (the surfaces Algorithms 1 and
// 2 move between), and the band its load falls in.
struct CacheHit {
  std::vector<const TableStratum*> bands;
  size_t band = 0;
  double path_distance = 0, dataset_distance = 0;  // to the centroids, in the tiers' coordinates
};
// Tier 1: the nearest path centroid within kPathCut of the query's (over
// the coordinates the query knows: a link rate or loss not yet measured is
// left out); tier 2:
// that path's nearest dataset centroid within kDatasetCut; tier 3: the band
// holding q.ext_load (q.ext_load < 0: the lightest, "start with the light
// external load surface"). nullopt: a miss (the predictor's case).
std::optional<CacheHit> lookup(const ParamTable& t, const Query& q);

// The entry of a stratum for an SLA. "throughput" (eq. 10): the least energy
// whose throughput bound reaches `bound` Mbit/s (0: the most throughput);
// "energy" (eq. 11): the most throughput whose energy bound stays within
// `bound` J/GB (0: the least energy). met = false when no entry reaches the
// bound (then the closest: the most throughput, or the least energy). A
// stratum without energy figures answers "energy" with its lowest
// throughput level (the cheapest), met = false.
const TableEntry* choose(const TableStratum& s, const std::string& sla, double bound, bool& met);

// The entry for an SLA given as a share of the stratum's best throughput
// ("throughput", level 0.9: the least energy at >= 90% of the most), or a
// multiple of its least energy ("energy", 1.25): choose() at that bound.
const TableEntry* choose_level(const TableStratum& s, const std::string& sla, double level, bool& met);

// FastHLA Algorithm 1: per-chunk optima scaled down (cc) when their sum
// passes the channel limit.
std::vector<Knobs> schedule_mixed(std::vector<Knobs> per_chunk, int max_channels);

// ---- the whole analysis ---------------------------------------------------------------

struct Analysis {
  Preprocessed pre;
  Strata strata;
  // Per table stratum, in the table's order; a stratum with too few rows to
  // fit has an empty model (fitted false).
  std::vector<StratumModel> models;
  std::vector<std::string> skipped;  // strata whose surfaces were not fitted or not trusted, with why
  ParamTable table;
  PredictorReport predictor;
};
// The SLA ladders of the table: throughput at these shares of the stratum's
// best (eq. 10), energy at these multiples of its least (eq. 11).
inline const std::vector<double> kThroughputLevels = {0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0};
inline const std::vector<double> kEnergyLevels = {1.0, 1.1, 1.25, 1.5, 2.0};
// Every stratum gets entries: from its surfaces when it has min_rows rows and
// they are trusted (kTrustScatter), else from its measured settings; so a
// history of one finished job already gives a table. Throws HistoryError
// when there is nothing to learn from (no rows, or no row left after
// preprocessing).
Analysis analyze(const HistoryData& h, const std::string& history_name, size_t min_rows = 12, uint64_t seed = 1);

// ---- step 5: pictures ---------------------------------------------------------------

// Per stratum: throughput and energy over (cc, p) as heatmaps and over
// cores as curves, the optima marked. Returns the files written.
// models[i] is the model of t.strata[i] (Analysis::models).
std::vector<std::string> write_plots(const std::vector<StratumModel>& models, const ParamTable& t, const std::string& dir);

}  // namespace xfer::hla
