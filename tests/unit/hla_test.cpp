// The offline analysis (issue 14 §3): UPGMA on a hand-checkable tree,
// preprocessing counts, strata tiers, spline surfaces fitted to a history
// generated from a known function (the optimiser lands within one level of
// the true optimum), and the parameter table's format.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <tuple>

#include "xfer/hla.h"
#include "xfer/running_job.h"
#include "xfer/history.h"

using namespace xfer::hla;

TEST(Hla, UpgmaBuildsTheTreeByAverageLinkage) {
  // 1-D points 0, 1, 5, 6, 20. UPGMA by hand: {0,1} at 1 and {5,6} at 1;
  // {0,1}+{5,6} at (5+6+4+5)/4 = 5 ({5,6}-{20} is (15+14)/2 = 14.5);
  // then everything at (20+19+15+14)/4 = 17. (Single linkage would join the
  // last at 14, complete linkage at 20.)
  Dendrogram d = upgma({{0}, {1}, {5}, {6}, {20}}, 3);
  ASSERT_EQ(d.heights.size(), 4u);
  EXPECT_DOUBLE_EQ(d.heights[0], 1);
  EXPECT_DOUBLE_EQ(d.heights[1], 1);
  EXPECT_DOUBLE_EQ(d.heights[2], 5);
  EXPECT_DOUBLE_EQ(d.heights[3], 17);
  EXPECT_EQ(d.k, 3);
  EXPECT_EQ(d.cluster, (std::vector<int>{0, 0, 1, 1, 2}));
  Dendrogram wide = upgma({{0}, {1}, {5}, {6}, {20}}, 10);
  EXPECT_EQ(wide.k, 2);
  EXPECT_EQ(wide.cluster, (std::vector<int>{0, 0, 0, 0, 1}));
}

namespace {

// A history from known functions of the parameters: throughput peaks at
// cc 8 and p 2 and grows with pp; energy per GB is least at cc 4 and p 2,
// and grows with cores.
const std::vector<int> kCc = {1, 2, 4, 8, 16, 32}, kP = {1, 2, 4}, kPp = {1, 2, 4, 8}, kCores = {1, 2};

double true_t(const Knobs& k) {
  double c = std::log2(k.cc), p = std::log2(k.p), pp = std::log2(k.pp);
  return 100 + 80 * std::exp(-(c - 3) * (c - 3) / 2) + 20 * std::exp(-(p - 1) * (p - 1)) + 6 * pp - 4 * (k.cores - 1);
}
double true_e(const Knobs& k) {
  double c = std::log2(k.cc), p = std::log2(k.p), pp = std::log2(k.pp);
  return 300 - 60 * std::exp(-(c - 2) * (c - 2) / 2) + 15 * (p - 1) * (p - 1) - 3 * pp + 25 * k.cores;
}

std::vector<Sample> synthetic(double noise, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0, 1);
  std::vector<Sample> out;
  for (int rep = 0; rep < 3; ++rep)
    for (int cc : kCc)
      for (int p : kP)
        for (int pp : kPp)
          for (int cores : kCores) {
            Sample s;
            s.run = "r" + std::to_string(rep);
            s.link_mbps = 1000, s.rtt_ms = 40, s.files = 500, s.bytes = 5e7, s.size_mean = 1e5, s.size_sd = 1e3;
            s.cc = cc, s.p = p, s.pp = pp, s.cores = cores;
            Knobs k{cc, p, pp, cores, 0};
            s.mbps = true_t(k) * (1 + noise * n(rng));
            s.j_per_gb = true_e(k) * (1 + noise * n(rng));
            out.push_back(s);
          }
  return out;
}

}  // namespace

// Throughput that grows with the requests in flight (a product of the
// knobs' factors, as cc x pp is on a long path) and energy per GB that falls
// with them: the model recovers both across the grid, corners included,
// from noisy rows (issue 55: fitted as a sum in the value itself, the
// surfaces put the far corner at the sum of the gains seen alone; the held-
// out error here was 41% for throughput and 13% for energy, against 1% noise).
TEST(Hla, SurfacesRecoverAProductOfTheKnobs) {
  auto t_of = [](const Knobs& k) {
    return 4.0 * std::pow(k.cc, 0.8) * std::pow(k.p, 0.2) * std::pow(k.pp, 0.5) * (1 - 0.05 * (k.cores - 1));
  };
  auto e_of = [](const Knobs& k) {
    return 900.0 / (std::pow(k.cc, 0.4) * std::pow(k.pp, 0.3)) * (1 + 0.3 * (k.cores - 1));
  };
  std::vector<Sample> s = synthetic(0.01, 11);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> n(0, 0.01);
  for (Sample& x : s) {
    Knobs k{x.cc, x.p, x.pp, x.cores, 0};
    x.mbps = t_of(k) * (1 + n(rng));
    x.j_per_gb = e_of(k) * (1 + n(rng));
  }
  std::vector<size_t> rows(s.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  StratumModel m = fit_stratum(s, rows, 3);
  ASSERT_TRUE(m.fitted);
  EXPECT_LT(m.rmse_t_rows, 0.03);
  EXPECT_LT(m.rmse_e_rows, 0.03);
  m.t_cap = 0;  // (the rows' link, 1000 Mbit/s, is past every value here)
  for (const Knobs& k : {Knobs{32, 4, 8, 1, 0}, Knobs{1, 1, 1, 2, 0}, Knobs{32, 1, 1, 1, 0}, Knobs{1, 1, 8, 1, 0},
                         Knobs{12, 3, 3, 2, 0}}) {
    SCOPED_TRACE(::testing::Message() << k.cc << "x" << k.p << "x" << k.pp << ", " << k.cores << " cores");
    EXPECT_NEAR(m.throughput(k) / t_of(k), 1.0, 0.05);
    EXPECT_NEAR(m.energy(k) / e_of(k), 1.0, 0.05);
  }
}

TEST(Hla, SurfacesOfAKnownFunctionLeadToItsOptimum) {
  std::vector<Sample> s = synthetic(0.01, 7);
  std::vector<size_t> rows(s.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  StratumModel m = fit_stratum(s, rows, 3);
  EXPECT_TRUE(m.has_energy);
  EXPECT_TRUE(m.one_frequency);
  EXPECT_EQ(m.t[1].kind(), Surface::Kind::Surface);  // (cc, p): a bicubic surface
  EXPECT_EQ(m.t[2].kind(), Surface::Kind::Curve);    // pp: a natural cubic curve
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(m.rmse_t[size_t(i)], 0.05) << "throughput surface " << i + 1;
    EXPECT_LT(m.rmse_e[size_t(i)], 0.05) << "energy surface " << i + 1;
  }
  EXPECT_LT(m.rmse_t_rows, 0.05);

  // The second-derivative test finds the throughput surface's maximum near
  // cc 8 (log2 3), p 2 (log2 1), and the energy's minimum near cc 4, p 2.
  bool t_max = false, e_min = false;
  for (const auto& x : m.t[1].extrema()) t_max |= !x.minimum && std::abs(x.x - 3) < 0.5 && std::abs(x.y - 1) < 0.5;
  for (const auto& x : m.e[1].extrema()) e_min |= x.minimum && std::abs(x.x - 2) < 0.5 && std::abs(x.y - 1) < 0.5;
  EXPECT_TRUE(t_max);
  EXPECT_TRUE(e_min);

  // eq. 10 and eq. 11 on the fitted model against brute force on the truth,
  // over every whole setting in the history's ranges (what the optimiser
  // samples): the answer reaches its bound and costs no more than the true
  // optimum allows (kTie, and 3% for the noise and the fit).
  std::vector<Knobs> grid;
  for (int cc = 1; cc <= 32; ++cc)
    for (int p = 1; p <= 4; ++p)
      for (int pp = 1; pp <= 8; ++pp)
        for (int cores : kCores) grid.push_back({cc, p, pp, cores, 0});
  double t_max_true = 0, e_min_true = 1e300;
  for (const Knobs& k : grid) t_max_true = std::max(t_max_true, true_t(k)), e_min_true = std::min(e_min_true, true_e(k));
  auto best = [&](auto feasible, auto objective) {
    double b = -1e300;
    for (const Knobs& k : grid)
      if (feasible(k)) b = std::max(b, objective(k));
    return b;
  };
  std::vector<Knobs> c = candidates(m);
  for (double level : {0.7, 0.8, 0.9}) {
    double bound = level * t_max_true;
    double least = -best([&](const Knobs& k) { return true_t(k) >= bound; }, [](const Knobs& k) { return -true_e(k); });
    Choice got = least_energy(m, c, bound);
    SCOPED_TRACE(::testing::Message() << "floor " << bound << ": " << got.knobs.cc << "x" << got.knobs.p << "x"
                                      << got.knobs.pp << ", " << got.knobs.cores << " cores");
    EXPECT_TRUE(got.feasible);
    EXPECT_GE(true_t(got.knobs), 0.97 * bound);
    EXPECT_LE(true_e(got.knobs), (1 + kTie + 0.03) * least);
  }
  for (double level : {1.1, 1.25}) {
    double bound = level * e_min_true;
    double most = best([&](const Knobs& k) { return true_e(k) <= bound; }, [](const Knobs& k) { return true_t(k); });
    Choice got = most_throughput(m, c, bound);
    SCOPED_TRACE(::testing::Message() << "ceiling " << bound << ": " << got.knobs.cc << "x" << got.knobs.p << "x"
                                      << got.knobs.pp << ", " << got.knobs.cores << " cores");
    EXPECT_TRUE(got.feasible);
    EXPECT_LE(true_e(got.knobs), 1.03 * bound);
    EXPECT_GE(true_t(got.knobs), (1 - kTie - 0.03) * most);
  }
}

TEST(Hla, AFloorBetweenTwoTriedSettingsIsMetByASettingBetweenThem) {
  // Cross-LayerHLA §III-A samples the surfaces "to predict the previously
  // missing parameters": the history tried cc 2, 8, 16 and 32 (88, 253,
  // 346 and 393 Mbit/s of a saturating link), J/GB grows with the channels.
  // A floor of 150 lies between cc 2 and cc 8; the truth needs cc 4
  // (157 Mbit/s). The table answers it at that bound, not at a rung of a
  // ladder, with a setting the history never ran.
  auto truth = [](int cc) { return 400 * (1 - std::exp(-cc / 8.0)); };
  std::vector<Sample> s;
  for (int rep = 0; rep < 3; ++rep)
    for (int cc : {2, 8, 16, 32}) {
      Sample x;
      x.run = "r" + std::to_string(rep);
      x.link_mbps = 400, x.cc = cc;
      x.mbps = truth(cc) * (1 + 0.003 * (rep - 1));
      x.j_per_gb = 100 + 4.0 * cc;
      s.push_back(x);
    }
  std::vector<size_t> rows(s.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  StratumModel m = fit_stratum(s, rows, 1);
  TableStratum st;
  st.entries = sla_entries(m, candidates(m));
  for (double floor : {150.0, 120.0, 300.0}) {
    bool met = false;
    const TableEntry* e = choose(st, "throughput", floor, met);
    ASSERT_NE(e, nullptr);
    SCOPED_TRACE(::testing::Message() << "floor " << floor << ": cc " << e->choice.knobs.cc << ", predicted "
                                      << e->choice.mbps << ", true " << truth(e->choice.knobs.cc));
    EXPECT_TRUE(met);
    EXPECT_GE(truth(e->choice.knobs.cc), floor);
    EXPECT_LE(truth(e->choice.knobs.cc), 1.15 * floor);
  }
  bool met = false;
  EXPECT_EQ(choose(st, "throughput", 150, met)->choice.knobs.cc, 4);
  // Ceilings likewise: 150 J/GB allows up to cc 12 (311 Mbit/s), between
  // the tried 8 and 16; cc 11 is within kTie of it and cheaper.
  const TableEntry* e = choose(st, "energy", 150, met);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(met);
  EXPECT_GT(e->choice.knobs.cc, 8) << e->choice.j_per_gb;
  EXPECT_LT(e->choice.knobs.cc, 16) << e->choice.j_per_gb;
  EXPECT_LE(100 + 4.0 * e->choice.knobs.cc, 150 * 1.03);
  EXPECT_GE(truth(e->choice.knobs.cc), (1 - kTie - 0.03) * truth(12));
  // Level 1: the most throughput, and the least energy.
  EXPECT_EQ(choose_level(st, "throughput", 1.0, met)->choice.knobs.cc, 32);
  EXPECT_EQ(choose_level(st, "energy", 1.0, met)->choice.knobs.cc, 2);
}

// A stratum of two visits to every (cc, p) of the grid on a 100 Mbit/s
// link, 2 cores, with the throughput and J/GB given; fitted.
template <typename T, typename E>
StratumModel fitted_cc_p_grid(T mbps, E j_per_gb) {
  std::vector<Sample> s;
  for (int rep = 0; rep < 2; ++rep)
    for (int cc : kCc)
      for (int p : kP) {
        Sample x;
        x.run = "r" + std::to_string(rep);
        x.link_mbps = 100;
        x.cc = cc, x.p = p, x.cores = 2;
        x.mbps = mbps(cc, p);
        x.j_per_gb = j_per_gb(cc, p);
        s.push_back(x);
      }
  std::vector<size_t> rows(s.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  return fit_stratum(s, rows, 1);
}

TEST(Hla, EqualOptimaGoToTheCheapestSetting) {
  // Throughput flat at the link rate for cc >= 2: eq. 11 must not pick
  // cc 32 because a spline wiggle puts it 0.1% higher.
  StratumModel m = fitted_cc_p_grid([](int cc, int p) { return cc * p == 1 ? 60 : 100 - 0.1 * ((cc * 7 + p) % 3); },
                                    [](int cc, int p) { return 50 + 0.2 * ((cc + p) % 2); });
  Choice got = most_throughput(m, candidates(m), 1e9);
  EXPECT_EQ(got.knobs.cc * got.knobs.p, 2) << got.knobs.cc << " x " << got.knobs.p;
  EXPECT_GE(got.mbps, 95);
}

TEST(Hla, CandidatesStayWhereTheHistoryMeasured) {
  // cc x p = 1 measured at 60 Mbit/s, everything else near 100: the least
  // training row is the floor, and a setting predicted below it is no
  // candidate (its J/GB would be extrapolated); none left: all of them.
  StratumModel m = fitted_cc_p_grid([](int cc, int p) { return cc * p == 1 ? 60.0 : 90.0 + cc % 5; },
                                    [](int, int) { return 50.0; });
  EXPECT_GE(m.t_floor, 60);
  EXPECT_LE(m.t_floor, 90);
  StratumModel unbounded = m;
  unbounded.t_floor = 0;
  size_t all = candidates(unbounded).size();
  EXPECT_GE(all, candidates(m).size());
  m.t_floor = 92;
  std::vector<Knobs> c = candidates(m);
  EXPECT_LT(c.size(), all);
  EXPECT_FALSE(c.empty());
  for (const Knobs& k : c) EXPECT_GE(m.throughput(k), 92) << k.cc << " x " << k.p;
  m.t_floor = 1e9;
  EXPECT_EQ(candidates(m).size(), all);
}

// Round 3 of hla-learning-115face, html (400 files of 100 KB): a dozen rows
// at five settings on a 350-Mbit/s link. 1x1x31 and 32x1x31 move 136-292
// Mbit/s, 2x1x1 and 8x1x1 11 and 44, 16x2x1 176; then `extra`.
struct HtmlRow {
  int cc, p, pp;
  double mbps, j_per_gb, seconds;
};
std::vector<HtmlRow> html_round3_rows(std::vector<HtmlRow> extra = {}) {
  std::vector<HtmlRow> rows{{1, 1, 31, 177, 367, 1.4}, {1, 1, 31, 199, 360, 1.4}, {1, 1, 31, 221, 367, 1.4},
                            {1, 1, 31, 232, 375, 1.4}, {1, 1, 31, 243, 362, 1.4}, {1, 1, 31, 254, 370, 1.4},
                            {1, 1, 31, 221, 368, 1.4}, {2, 1, 1, 11, 744, 27},      {8, 1, 1, 44, 492, 6.5},
                            {16, 2, 1, 176, 457, 1.5},  {32, 1, 31, 136, 440, 1.2}, {32, 1, 31, 292, 440, 1.2}};
  rows.insert(rows.end(), extra.begin(), extra.end());
  return rows;
}
StratumModel fitted_html_rows(const std::vector<HtmlRow>& rows_in, uint64_t seed) {
  std::vector<Sample> s;
  for (size_t i = 0; i < rows_in.size(); ++i) {
    Sample x;
    x.run = "r" + std::to_string(i);
    x.link_mbps = 350;
    x.cc = rows_in[i].cc, x.p = rows_in[i].p, x.pp = rows_in[i].pp;
    x.mbps = rows_in[i].mbps, x.j_per_gb = rows_in[i].j_per_gb, x.seconds = rows_in[i].seconds;
    x.gb = x.mbps * x.seconds / 8e3;
    s.push_back(x);
  }
  std::vector<size_t> rows(s.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  return fit_stratum(s, rows, seed);
}

// The answer at level 1 of `sla` ("throughput": eq. 10's most;
// "energy": eq. 11's least) among a table's entries.
Choice level_one(std::vector<TableEntry> entries, const char* sla) {
  TableStratum st;
  st.entries = std::move(entries);
  bool met = false;
  const TableEntry* e = choose_level(st, sla, 1.0, met);
  return e ? e->choice : Choice{};
}
// The table's most-throughput answer over c: from the surfaces' own
// figures (`bounded` false), or as analyze solves it.
Choice most_throughput_answer(const StratumModel& m, const std::vector<Knobs>& c, bool bounded) {
  if (bounded) return level_one(sla_entries(m, c), "throughput");
  std::vector<Choice> raw;
  for (const Knobs& k : c) raw.push_back({k, m.throughput(k), m.energy(k), true});
  return level_one(sla_entries(raw, m.has_energy), "throughput");
}
int in_flight(const Knobs& k) { return k.cc * k.p * k.pp; }
std::string named(const Choice& x) {
  return fmt::format("{}x{}x{}, predicted {:.1f} Mbit/s", x.knobs.cc, x.knobs.p, x.knobs.pp, x.mbps);
}

TEST(Hla, TheTableAnswersWithinADoublingOfWhatTheHistoryMeasured) {
  // p 2 was measured once, with pp 1, and the surfaces carried its factor
  // to cc 1: they put 1x2x1 (two requests in flight, where 2x1x1 measured
  // 11) at the 350-Mbit/s link, and the table sent round 4's
  // most-throughput job there (21.9 Mbit/s). Every answer now lies within
  // one doubling of a measured setting.
  std::vector<HtmlRow> rows_in = html_round3_rows();
  StratumModel m = fitted_html_rows(rows_in, 2);
  ASSERT_TRUE(m.fitted);
  EXPECT_EQ(m.measured.size(), 5u);
  StratumModel unguarded = m;  // no measured settings to stay near: the corner, at the link
  unguarded.measured.clear();
  Choice corner = most_throughput_answer(unguarded, candidates(unguarded), true);
  EXPECT_EQ(in_flight(corner.knobs), 2) << named(corner);
  std::vector<Knobs> c = candidates(m);
  ASSERT_FALSE(c.empty());
  auto nearest = [&](const Knobs& k) {
    double d = 1e9;
    for (const HtmlRow& r : rows_in) d = std::min(d, knob_distance(k, Knobs{r.cc, r.p, r.pp, 1, 0}));
    return d;
  };
  for (const Knobs& k : c) EXPECT_LE(nearest(k), 1.0 + 1e-9) << k.cc << "x" << k.p << "x" << k.pp;
  Choice got = most_throughput_answer(m, c, true);
  EXPECT_GT(in_flight(got.knobs), 2) << named(got) << ": two requests in flight, where 2x1x1 measured 11 Mbit/s";
  EXPECT_LE(nearest(got.knobs), 1.0 + 1e-9) << named(got);
  // The distance itself: log2 of each knob's ratio, summed.
  EXPECT_DOUBLE_EQ(knob_distance(Knobs{1, 2, 1, 1, 0}, Knobs{2, 1, 1, 1, 0}), 2.0);
  EXPECT_DOUBLE_EQ(knob_distance(Knobs{4, 1, 8, 2, 0}, Knobs{8, 1, 8, 1, 0}), 2.0);
  EXPECT_DOUBLE_EQ(knob_distance(Knobs{3, 1, 1, 1, 0}, Knobs{3, 1, 1, 1, 0}), 0.0);
}

TEST(Hla, ASettingIsPutNoHigherThanItsRequestsInFlightAllow) {
  // Round 4 of hla-learning-a9e0719, curve 2: the history had also
  // measured 1x1x1 (4.5 Mbit/s), 20x1x31, 32x2x1 and more of 32x1x31, so
  // 1x2x1 lay one doubling of p from a measured setting, and the surfaces
  // put it at the link again (350 Mbit/s; round 5's job ran at 31). Two
  // requests in flight move at most twice what one did, and no more than
  // 2x1x1's two did (11 Mbit/s): bounded, 1x2x1 is no answer.
  StratumModel m = fitted_html_rows(html_round3_rows({{1, 1, 1, 4.5, 1184, 0.5}, {20, 1, 31, 156, 883, 0.5},
                                                     {32, 1, 31, 230, 395, 1}, {32, 1, 31, 269, 395, 1},
                                                     {32, 1, 31, 310, 395, 1}, {32, 1, 31, 250, 395, 1},
                                                     {32, 2, 1, 256, 500, 1}}), 3);
  ASSERT_TRUE(m.fitted);
  double slack = 1 + std::max(m.repeat_t, kTie);
  EXPECT_LE(m.bounded_throughput(Knobs{1, 2, 1, 1, 0}), 11 * slack + 1e-9);
  EXPECT_LE(m.bounded_throughput(Knobs{2, 2, 1, 1, 0}), 2 * 11 * slack + 1e-9);  // twice 2x1x1's requests
  EXPECT_LE(m.bounded_throughput(Knobs{1, 1, 1, 1, 0}), 4.5 * slack + 1e-9);  // its own measure
  // A measured setting is never put below itself (1x1x31's 7 Mbit/s per
  // request is more than 2x1x1's 5.5, with fewer requests in flight).
  for (const MeasuredSetting& x : m.measured)
    EXPECT_GE(m.bounded_throughput(x.knobs), std::min(m.throughput(x.knobs), x.mbps) - 1e-9)
        << x.knobs.cc << "x" << x.knobs.p << "x" << x.knobs.pp;
  // Below every bound, the surfaces' own figure.
  EXPECT_DOUBLE_EQ(m.bounded_throughput(Knobs{32, 1, 31, 1, 0}), m.throughput(Knobs{32, 1, 31, 1, 0}));
  std::vector<Knobs> c = candidates(m);
  Choice raw = most_throughput_answer(m, c, false);  // 1x2x1, within a doubling of 1x1x1
  EXPECT_EQ(in_flight(raw.knobs), 2) << named(raw);
  Choice got = most_throughput_answer(m, c, true);
  EXPECT_GT(in_flight(got.knobs), 2) << named(got);
  EXPECT_GE(got.mbps, 150) << named(got);
}

TEST(Hla, ASettingWithFewerRequestsThanAnyMeasuredIsPutNoFasterPerRequest) {
  // Round 3 of hla-learning-5756485, curve 1: no row had fewer than two
  // requests in flight, and the surfaces put 1x1x1 at 218 Mbit/s, a tie
  // with 1x1x31's measured 222, so the cheapest-tie rule sent round 4's
  // most-throughput job to it (17 Mbit/s; 1x1x1 measured 5.3 then). No
  // measured request had moved faster than 1x1x31's 7 Mbit/s each.
  std::vector<HtmlRow> rows{{1, 1, 31, 160, 395, 1.2}, {1, 1, 31, 190, 390, 1.2}, {1, 1, 31, 215, 395, 1.2},
                            {1, 1, 31, 225, 400, 1.2}, {1, 1, 31, 240, 392, 1.3}, {1, 1, 31, 260, 398, 1.3},
                            {1, 1, 31, 265, 395, 1.3}, {2, 1, 1, 11.1, 1029, 27},   {8, 1, 1, 44.6, 562, 6.5},
                            {16, 2, 1, 175, 538, 1.5},  {17, 1, 31, 154.5, 825, 0.5}, {32, 1, 31, 132, 529, 1},
                            {32, 1, 31, 215, 529, 1}};
  StratumModel m = fitted_html_rows(rows, 4);
  ASSERT_TRUE(m.fitted);
  const Knobs one{1, 1, 1, 1, 0};
  EXPECT_GT(m.throughput(one), 150);  // the surfaces' own figure
  double fastest = 0;                 // Mbit/s per request in flight, over the measured settings
  for (const MeasuredSetting& x : m.measured) fastest = std::max(fastest, x.mbps / in_flight(x.knobs));
  EXPECT_NEAR(fastest, 225.0 / 31, 0.5);
  EXPECT_LE(m.bounded_throughput(one), fastest * (1 + std::max(m.repeat_t, kTie)) + 1e-9);
  std::vector<Knobs> c = candidates(m);
  Choice raw = most_throughput_answer(m, c, false);  // 1x1x1 ties with the best and is the cheapest
  EXPECT_EQ(in_flight(raw.knobs), 1) << named(raw);
  Choice got = most_throughput_answer(m, c, true);
  EXPECT_GE(in_flight(got.knobs), 31) << named(got);
}

// The table's least-energy answer over c: with the surfaces' own J/GB
// beside the bounded throughput (`time` false, as fb4acd7 solved it), or
// as analyze solves it.
Choice least_energy_answer(const StratumModel& m, const std::vector<Knobs>& c, bool time) {
  if (time) return level_one(sla_entries(m, c), "energy");
  std::vector<Choice> raw;
  for (const Knobs& k : c) raw.push_back({k, m.bounded_throughput(k), m.energy(k), true});
  return level_one(sla_entries(raw, m.has_energy), "energy");
}

TEST(Hla, TheCostOfTimeIsFittedFromTheRows) {
  // Rows made by J/GB = 300 + (0.3 + 0.1 x channels) x 8000 / Mbit/s: the
  // fit gives back the three costs.
  std::vector<Sample> s;
  for (auto [cc, p, mbps] : std::vector<std::tuple<int, int, double>>{
           {1, 1, 20}, {2, 1, 35}, {8, 1, 90}, {16, 2, 180}, {4, 1, 60}, {1, 1, 25}}) {
    Sample x;
    x.cc = cc, x.p = p, x.pp = 1 + cc % 3, x.mbps = mbps, x.seconds = 2;
    x.j_per_gb = 300 + (0.3 + 0.1 * cc * p) * 8000 / mbps;
    s.push_back(x);
  }
  std::vector<size_t> rows{0, 1, 2, 3, 4, 5};
  StratumModel::TimeCost tc = fit_time_cost(s, rows);
  ASSERT_TRUE(tc.fitted);
  EXPECT_EQ(tc.settings, 5u);
  EXPECT_NEAR(tc.per_gb, 300, 0.5);
  EXPECT_NEAR(tc.per_s, 0.3, 0.005);
  EXPECT_NEAR(tc.per_conn_s, 0.1, 0.002);
  // No cost below zero: J/GB that falls as the rate falls would need a
  // negative cost of time; the fit keeps it at zero.
  for (Sample& x : s) x.j_per_gb = 400 - 10 * 8000 / x.mbps / 100;
  tc = fit_time_cost(s, rows);
  ASSERT_TRUE(tc.fitted);
  EXPECT_GE(tc.per_s, 0);
  EXPECT_GE(tc.per_conn_s, 0);
  EXPECT_GE(tc.per_gb, 0);
  // Two settings are too few to tell bytes from time.
  EXPECT_FALSE(fit_time_cost(s, {0, 5, 1}).fitted);
  EXPECT_EQ(fit_time_cost(s, {0, 5, 1}).settings, 2u);
}

TEST(Hla, ASettingTheBoundSlowsPaysForItsLongerTime) {
  // Round 3 of hla-learning-fb4acd7, html: the J/GB surface is clamped at
  // the least a row measured, so every slow corner ties for least energy,
  // and the cheapest-tie rule put hla-energy at 1x1x1. Bounded, 1x1x1 moves
  // at most 9 Mbit/s, where 2x1x1 measured 690 J/GB at 11: round 4's job
  // ran there at 0.33x min-energy's throughput and 1.27x its J/GB.
  std::vector<HtmlRow> rows{{32, 1, 31, 285.4, 362, 1.0}, {32, 1, 31, 155.8, 445, 1.5},  {1, 1, 31, 244.9, 369, 1.29},
                            {2, 1, 1, 11.2, 690, 28.05},  {1, 1, 31, 214.9, 321, 1.47},  {1, 1, 31, 160.6, 339, 0.5},
                            {17, 1, 31, 155.7, 749, 0.5}, {1, 1, 31, 216.3, 313, 1.46},  {8, 1, 1, 44.6, 561, 6.46},
                            {1, 1, 31, 240.1, 341, 1.31}, {1, 1, 31, 182.4, 389, 1.5},   {1, 1, 31, 207.5, 315, 1.5},
                            {16, 2, 1, 176.0, 453, 1.5}};
  StratumModel m = fitted_html_rows(rows, 1);
  ASSERT_TRUE(m.fitted);
  ASSERT_TRUE(m.time_cost.fitted);
  EXPECT_GT(m.time_cost.per_s + m.time_cost.per_conn_s, 0);
  std::vector<Knobs> c = candidates(m);
  Choice old = least_energy_answer(m, c, false);
  EXPECT_LT(m.bounded_throughput(old.knobs), 0.5 * m.throughput(old.knobs)) << named(old);
  Choice got = least_energy_answer(m, c, true);
  EXPECT_GE(got.mbps, 150) << named(got);
  EXPECT_DOUBLE_EQ(got.j_per_gb, m.energy(got.knobs)) << named(got) << ": not a setting the bound cuts";
  // What a cut adds: the seconds the same GB takes longer, at the fitted
  // cost of a second and of a connection-second.
  const Knobs one{1, 1, 1, 1, 0};
  double t = m.throughput(one), cut = m.bounded_throughput(one);
  ASSERT_LT(cut, t);
  const auto& tc = m.time_cost;
  EXPECT_NEAR(m.bounded_energy(one), m.energy(one) + (tc.per_s + tc.per_conn_s) * 8000 * (1 / cut - 1 / t), 1e-6);
  EXPECT_GT(m.bounded_energy(one), 500);
  // Where the bound keeps the surfaces' throughput, their J/GB stands.
  for (const MeasuredSetting& x : m.measured) {
    if (m.bounded_throughput(x.knobs) >= m.throughput(x.knobs)) {
      EXPECT_DOUBLE_EQ(m.bounded_energy(x.knobs), m.energy(x.knobs));
    }
  }
  // Not fitted: the whole figure scales with the time.
  m.time_cost.fitted = false;
  EXPECT_NEAR(m.bounded_energy(one), m.energy(one) * t / cut, 1e-6);
}

TEST(Hla, PreprocessingSaysWhatEachRuleRemoved) {
  HistoryData h;
  auto run = [&](const std::string& id, const std::string& outcome) {
    RunRow r;
    r.node = "n", r.run = id, r.outcome = outcome, r.link_mbps = 100;
    h.runs.push_back(r);
  };
  run("ok", "done");
  run("bad", "failed");
  auto row = [&](const std::string& id, int seq, double mbps, bool settling = false, double interval = 1) {
    IntervalRow i;
    i.node = "n", i.run = id, i.seq = seq, i.throughput_bps = mbps * 1e6, i.bytes_interval = int64_t(mbps * 1e6 / 8);
    i.settling = settling, i.interval_s = interval, i.joules = 1;
    h.intervals.push_back(i);
  };
  for (int k = 0; k < 10; ++k) row("ok", k, 50 + k % 3);  // kept
  row("ok", 10, 50, true);                              // settling
  row("ok", 11, 50, false, 0.2);                        // partial
  row("ok", 12, 0);                                     // idle
  row("ok", 13, 150);                                   // above the 100 Mbit/s link
  row("ok", 14, 90);                                    // an outlier among 50-52
  row("bad", 0, 50);                                    // its run failed
  row("gone", 0, 50);                                   // no run row at all
  row("ok", 15, 50);
  h.intervals.back().cores = -5;                        // impossible (a forged history)
  row("ok", 16, 50);
  h.intervals.back().cc = 1000000, h.intervals.back().freq_khz = int64_t(1e12);
  Preprocessed p = preprocess(h);
  EXPECT_EQ(p.input, 19u);
  ASSERT_EQ(p.rules.size(), 7u);
  EXPECT_EQ(p.rules[0].removed, 2u);  // not done
  EXPECT_EQ(p.rules[1].removed, 1u);  // settling
  EXPECT_EQ(p.rules[2].removed, 1u);  // partial
  EXPECT_EQ(p.rules[3].removed, 1u);  // idle
  EXPECT_EQ(p.rules[4].removed, 1u);  // above the link
  EXPECT_EQ(p.rules[5].removed, 2u);  // impossible settings
  EXPECT_EQ(p.rules[6].removed, 1u);  // outlier
  EXPECT_EQ(p.kept, 10u);
  // The ten rows are one run's chunk at one setting: one sample, its
  // throughput the rows' bytes over their time.
  ASSERT_EQ(p.samples.size(), 1u);
  EXPECT_EQ(p.samples[0].intervals, 10);
  double bits = 0, secs = 10;
  for (int k = 0; k < 10; ++k) bits += (50 + k % 3) * 1e6;
  EXPECT_NEAR(p.samples[0].mbps, bits / secs / 1e6, 1e-6);
}

namespace {
// A done run of node "n" on a 100 Mbit/s link, and its interval rows of one second.
HistoryData one_run(const std::string& run) {
  HistoryData h;
  RunRow r;
  r.node = "n", r.run = run, r.outcome = "done", r.link_mbps = 100;
  h.runs.push_back(r);
  return h;
}
IntervalRow second_of(const HistoryData& h, int seq) {
  IntervalRow i;
  i.node = h.runs[0].node, i.run = h.runs[0].run, i.seq = seq, i.interval_s = 1;
  return i;
}
// One run held at cc 4 for n intervals (the first settles), each row then
// filled in by `fill`.
HistoryData held_at_cc4(int n, const std::function<void(IntervalRow&, int seq)>& fill) {
  HistoryData h = one_run("job");
  for (int seq = 0; seq < n; ++seq) {
    IntervalRow i = second_of(h, seq);
    i.settling = seq == 0;
    i.cc = 4;
    fill(i, seq);
    h.intervals.push_back(i);
  }
  return h;
}
}  // namespace

TEST(Hla, EachVisitToASettingIsOneSample) {
  HistoryData h = one_run("sweep");
  // cc 4 (seq 0-2), cc 8 (3-5), cc 4 again (6-8); the first of each settles.
  for (int seq = 0; seq < 9; ++seq) {
    IntervalRow i = second_of(h, seq);
    i.settling = seq % 3 == 0;
    i.cc = seq / 3 == 1 ? 8 : 4;
    double mbps = seq < 3 ? 40 : seq < 6 ? 70 : 44;
    i.throughput_bps = mbps * 1e6, i.bytes_interval = int64_t(mbps * 1e6 / 8);
    h.intervals.push_back(i);
  }
  Preprocessed p = preprocess(h);
  ASSERT_EQ(p.samples.size(), 3u);
  std::vector<double> at4;
  for (const Sample& x : p.samples) {
    EXPECT_EQ(x.intervals, 2);
    if (x.cc == 4) at4.push_back(x.mbps);
  }
  std::sort(at4.begin(), at4.end());
  ASSERT_EQ(at4.size(), 2u);
  EXPECT_NEAR(at4[0], 40, 1e-9);
  EXPECT_NEAR(at4[1], 44, 1e-9);
}

// The interval that held a one-off of the measuring (the flow monitor's
// load: its rows' reason holds kOneOffTag) is left out as a settling one
// is, without cutting its setting's visit in two: cc 4 for seq 0-5 with the
// load at seq 3, at ten times a look's energy, is one sample of four
// intervals, its J/GB the other looks'.
TEST(Hla, TheFlowMonitorsLoadIsNoSettingsEnergy) {
  HistoryData h = held_at_cc4(6, [](IntervalRow& i, int seq) {
    i.throughput_bps = 40e6, i.bytes_interval = int64_t(40e6 / 8);
    i.dynamic_joules = seq == 3 ? 5.0 : 0.5;
    i.reason = std::string("static: fixed by the caller") + (seq == 3 ? std::string(kOneOffTag) : "");
  });
  Preprocessed p = preprocess(h);
  ASSERT_EQ(p.samples.size(), 1u);
  EXPECT_EQ(p.samples[0].intervals, 4);
  ASSERT_TRUE(p.samples[0].j_per_gb);
  EXPECT_NEAR(*p.samples[0].j_per_gb, 0.5 / (40e6 / 8 / 1e9), 1e-6);
}

// An online tuner's trials are told from the rest by their rows' reason
// (kExploreTag), and the table keeps, per stratum, the time its samples
// held and of it the trials': the budget for trials is the stratum's,
// across jobs (HlaTuner.TheExplorationBudgetIsTheStratumsAcrossJobs).
TEST(Hla, TrialsAreCountedPerStratum) {
  HistoryData h = one_run("job");
  // cc 4 (seq 0-5), a trial at cc 8 (6-8), cc 4 again (9-11); the first of each settles.
  for (int seq = 0; seq < 12; ++seq) {
    IntervalRow i = second_of(h, seq);
    i.settling = seq == 0 || seq == 6 || seq == 9;
    const bool trial = seq >= 6 && seq < 9;
    i.cc = trial ? 8 : 4;
    i.reason = trial ? std::string("hla-throughput") + std::string(kExploreTag) + "1 so far): the large chunk at 8x1x1"
                     : "hla-throughput: start: large chunk from P1/D1/L1";
    const double mbps = trial ? 70 : 40 + seq % 2;
    i.throughput_bps = mbps * 1e6, i.bytes_interval = int64_t(mbps * 1e6 / 8);
    h.intervals.push_back(i);
  }
  Preprocessed p = preprocess(h);
  ASSERT_EQ(p.samples.size(), 3u);
  for (const Sample& x : p.samples) EXPECT_EQ(x.explored, x.cc == 8) << x.cc;
  Analysis a = analyze(h, "trials", 2);
  ASSERT_EQ(a.table.strata.size(), 1u);
  EXPECT_NEAR(a.table.strata[0].seconds, 9, 1e-6);
  EXPECT_NEAR(a.table.strata[0].explored_s, 2, 1e-6);
  // Through the table's JSON and back.
  ParamTable back = table_from_json(to_json(a.table));
  EXPECT_NEAR(back.strata[0].explored_s, 2, 1e-6);
  nlohmann::json j = to_json(a.table);
  j["strata"][0]["explored_s"] = 50.0;  // more trials than time: refused
  EXPECT_THROW(table_from_json(j), TableError);
}

// A stratum's load is the mean of its rows' loads (the predictor's input for
// it). It was summed from the "not known" -1, so every stratum said a load
// under 0 and the predictor took its band's middle instead.
TEST(Hla, AStratumsLoadIsTheMeanOfItsRows) {
  HistoryData h = held_at_cc4(8, [](IntervalRow& i, int seq) {
    i.reason = "hla-throughput: start: large chunk from P1/D1/L1";
    i.ext_load = 0.25;
    i.throughput_bps = (40 + seq % 2) * 1e6, i.bytes_interval = int64_t(i.throughput_bps / 8);
  });
  Analysis a = analyze(h, "load", 1);
  ASSERT_EQ(a.table.strata.size(), 1u);
  EXPECT_NEAR(a.table.strata[0].load_mean, 0.25, 1e-9);
  EXPECT_NEAR(table_from_json(to_json(a.table)).strata[0].load_mean, 0.25, 1e-9);
}

TEST(Hla, StrataTiersArePathThenDatasetThenLoad) {
  std::vector<Sample> s;
  for (double rate : {100.0, 1000.0})
    for (double mean : {1e5, 1e8})
      for (double load : {0.0, 0.3, 0.6})
        for (int k = 0; k < 20; ++k) {
          Sample x;
          x.link_mbps = rate, x.rtt_ms = rate == 100 ? 60 : 5;
          x.size_mean = mean, x.files = mean < 1e6 ? 1000 : 2, x.bytes = x.files * mean, x.size_sd = mean / 50;
          x.ext_load = load + 0.01 * (k % 3);
          s.push_back(x);
        }
  Strata st = stratify(s, 12);
  EXPECT_EQ(st.strata.size(), 2u * 2 * 3) << st.tree;
  for (const Stratum& x : st.strata) EXPECT_EQ(x.rows.size(), 20u) << x.id << "\n" << st.tree;
  EXPECT_NE(st.tree.find("P2/D2/L3"), std::string::npos) << st.tree;
}

TEST(Hla, MixedDatasetsAreScaledToTheChannelLimit) {
  std::vector<Knobs> k = schedule_mixed({{16, 1, 8, 1, 0}, {8, 2, 1, 1, 0}, {8, 4, 1, 1, 0}}, 16);
  EXPECT_EQ(k[0].cc, 8);  // 16 x 16 / 32
  EXPECT_EQ(k[1].cc, 4);
  EXPECT_EQ(k[2].cc, 4);
  EXPECT_EQ(k[0].pp, 8);  // only the channels are scaled
  EXPECT_EQ(schedule_mixed({{4, 1, 1, 1, 0}}, 16)[0].cc, 4);
}

TEST(Hla, TheTableRoundTripsAndBadTablesAreRefused) {
  std::vector<Sample> s = synthetic(0.01, 9);
  HistoryData none;
  ParamTable t;
  t.history = "synthetic";
  t.rows_used = s.size();
  TableStratum st;
  st.id = "P1/D1/L1", st.link_mbps = 1000, st.rtt_ms = 40, st.rows = s.size();
  st.entries.push_back({"throughput", 0.9, 180, {{8, 2, 8, 1, 0}, 190, 260, true}});
  t.strata.push_back(st);
  std::string dir = std::filesystem::temp_directory_path() / ("hla-table-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  save_table(t, dir + "/t.json");
  ParamTable back = load_table(dir + "/t.json");
  ASSERT_EQ(back.strata.size(), 1u);
  EXPECT_EQ(back.strata[0].entries[0].choice.knobs, (Knobs{8, 2, 8, 1, 0}));
  EXPECT_DOUBLE_EQ(back.strata[0].entries[0].choice.mbps, 190);
  EXPECT_FALSE(std::filesystem::exists(dir + "/t.json.tmp"));

  auto refused = [&](const std::string& text, const std::string& words) {
    std::ofstream(dir + "/bad.json") << text;
    try {
      load_table(dir + "/bad.json");
      ADD_FAILURE() << "loaded: " << text;
    } catch (const TableError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(dir + "/bad.json"), std::string::npos) << e.what();
    }
  };
  nlohmann::json j = to_json(t);
  j["version"] = 1;
  refused(j.dump(), "version 1");
  refused("{\"format\": \"something else\"}", "not a parameter table");
  refused("not json", "not JSON");
  j = to_json(t);
  j["strata"][0]["entries"][0]["params"]["cc"] = 0;
  refused(j.dump(), "'cc' = 0 is outside");
  j = to_json(t);
  j["strata"][0]["ext_load"] = {0.8, 0.2};
  refused(j.dump(), "ext_load");
  j = to_json(t);
  j["strata"][0].erase("entries");
  refused(j.dump(), "'entries' is missing");
  std::ofstream(dir + "/empty.json") << "";
  EXPECT_THROW(load_table(dir + "/empty.json"), TableError);
  EXPECT_THROW(load_table(dir), TableError);  // a directory
  std::filesystem::remove_all(dir);
}

TEST(Hla, AJobsEnergyIsSplitAmongItsChunksByWhatTheirSettingsCost) {
  // A job of two chunks: a small-file chunk on 8 connections and a large-file
  // one on 1. The energy follows 2e-8 J a byte and 0.5 J a connection-second.
  // Split by bytes, both chunks would get the job's J/GB whatever their
  // settings; the fitted model charges the eight connections to the chunk
  // that holds them.
  auto joules = [](const std::vector<double>& b, const std::vector<double>& c) {
    return 2e-8 * (b[0] + b[1]) + 0.5 * (c[0] + c[1]);
  };
  xfer::EnergySplit split;
  std::vector<double> b = {5e7, 5e7}, c = {8, 1};
  EXPECT_FALSE(split.fitted());
  EXPECT_DOUBLE_EQ(split.shares(b, c)[0], 0.5) << "by bytes until the model is fitted";
  for (auto [b0, b1, c0, c1] : {std::array<double, 4>{3e7, 6e7, 8, 1}, {4e7, 6e7, 4, 1}, {2e7, 8e7, 8, 2}, {5e7, 5e7, 16, 1}}) {
    std::vector<double> bb = {b0, b1}, cc = {c0, c1};
    split.add(joules(bb, cc), bb, cc);
  }
  ASSERT_TRUE(split.fitted());
  EXPECT_NEAR(split.per_byte(), 2e-8, 1e-12);
  EXPECT_NEAR(split.per_connection_s(), 0.5, 1e-6);
  std::vector<double> s = split.shares(b, c);
  double e0 = 2e-8 * 5e7 + 0.5 * 8, e1 = 2e-8 * 5e7 + 0.5 * 1;
  EXPECT_NEAR(s[0], e0 / (e0 + e1), 1e-6);
  EXPECT_NEAR(s[0] + s[1], 1, 1e-12);
  // Bytes and connections that always moved together say nothing apart:
  // by bytes.
  xfer::EnergySplit together;
  for (double k : {1.0, 2.0, 3.0, 4.0, 5.0}) together.add(k, {k * 1e7}, {k});
  EXPECT_FALSE(together.fitted());
}

// Issue 41: a table from the history everyday jobs write, not only from a
// sweep. Sixteen short jobs at static settings (cc {2, 8, 16, 32} x p {1, 2}
// on two datasets), 1-s intervals: each job is one sample of its setting,
// eight per stratum, fewer than the 12 rows surfaces need.
namespace {

struct Everyday {
  HistoryData h;
  // The path's answer at each setting (deterministic: what the jobs measured).
  static double mbps(int cc, int p, bool small) { return std::min(330.0, (small ? 6.0 : 14.0) * cc * std::pow(p, 0.8)); }
  static double j_per_gb(int cc, int p, bool small) { return (small ? 30 : 12) + 1.5 * cc * p + 4000 / mbps(cc, p, small); }
};

Everyday everyday_jobs(int steady_intervals) {
  Everyday e;
  int n = 0;
  for (bool small : {true, false})
    for (int cc : {2, 8, 16, 32})
      for (int p : {1, 2}) {
        RunRow r;
        r.node = "dtn", r.run = "job" + std::to_string(n++), r.outcome = "done", r.link_mbps = 350, r.handshake_rtt_ms = 70;
        r.loss_pct = 0.015, r.cores_present = 2;
        e.h.runs.push_back(r);
        double mbps = Everyday::mbps(cc, p, small);
        for (int seq = 0; seq < steady_intervals + 2; ++seq) {
          IntervalRow i;
          i.node = r.node, i.run = r.run, i.seq = seq, i.cc = cc, i.p = p, i.pp = 1, i.cores = 2;
          i.settling = seq == 0;
          i.interval_s = seq == steady_intervals + 1 ? 0.3 : 1.0;  // the tail is partial
          i.throughput_bps = mbps * 1e6, i.bytes_interval = int64_t(mbps * 1e6 / 8 * i.interval_s);
          i.dynamic_joules = Everyday::j_per_gb(cc, p, small) * double(i.bytes_interval) / 1e9;
          i.chunk_files = small ? 400 : 60, i.chunk_bytes = small ? 400'000'000 : 600'000'000;
          i.chunk_size_mean = small ? 1e6 : 1e7, i.chunk_size_sd = small ? 2e5 : 3e7;
          e.h.intervals.push_back(i);
        }
      }
  return e;
}

}  // namespace

TEST(Hla, AHistoryOfShortEverydayJobsGivesATableOfTheirBestMeasuredSettings) {
  Everyday e = everyday_jobs(3);
  Analysis a = analyze(e.h, "everyday", 12);
  ASSERT_EQ(a.table.strata.size(), 2u) << a.strata.tree;
  for (const TableStratum& s : a.table.strata) {
    EXPECT_EQ(s.decided, "measured") << s.id;
    EXPECT_NE(s.why.find("fewer than 12"), std::string::npos) << s.why;
    ASSERT_EQ(s.measured.size(), 8u) << s.id;
    bool small = s.files > 200;
    for (const MeasuredSetting& m : s.measured) {
      EXPECT_EQ(m.visits, 1u);
      EXPECT_NEAR(m.seconds, 3, 1e-6);
      EXPECT_NEAR(m.mbps, Everyday::mbps(m.knobs.cc, m.knobs.p, small), 1e-3);
      EXPECT_NEAR(m.j_per_gb, Everyday::j_per_gb(m.knobs.cc, m.knobs.p, small), 1e-3);
    }
    // Each floor gets a measured setting that met it at (within kTie of)
    // the least energy of those that did; the same for ceilings.
    for (double floor : {20.0, 60.0, 100.0, 150.0, 250.0, 320.0}) {
      double least = 1e300;
      for (const MeasuredSetting& m : s.measured)
        if (m.mbps >= floor) least = std::min(least, m.j_per_gb);
      bool met = false;
      const TableEntry* t = choose(s, "throughput", floor, met);
      ASSERT_NE(t, nullptr);
      if (least == 1e300) {
        EXPECT_FALSE(met) << floor;
        continue;
      }
      EXPECT_TRUE(met) << s.id << " floor " << floor;
      EXPECT_GE(t->choice.mbps, floor);
      EXPECT_LE(t->choice.j_per_gb, least * (1 + kTie) + 1e-9) << s.id << " floor " << floor;
      EXPECT_NEAR(t->choice.mbps, Everyday::mbps(t->choice.knobs.cc, t->choice.knobs.p, small), 1e-3);
    }
    for (double ceiling : {60.0, 80.0, 120.0}) {
      double most = -1;
      for (const MeasuredSetting& m : s.measured)
        if (m.j_per_gb <= ceiling) most = std::max(most, m.mbps);
      bool met = false;
      const TableEntry* t = choose(s, "energy", ceiling, met);
      ASSERT_NE(t, nullptr);
      if (most < 0) continue;
      EXPECT_LE(t->choice.j_per_gb, ceiling);
      EXPECT_GE(t->choice.mbps, most * (1 - kTie) - 1e-9) << s.id << " ceiling " << ceiling;
    }
  }
  // It round-trips as any table.
  ParamTable back = table_from_json(to_json(a.table));
  ASSERT_EQ(back.strata.size(), 2u);
  EXPECT_EQ(back.strata[0].decided, "measured");
  EXPECT_EQ(back.strata[0].measured.size(), 8u);
  EXPECT_EQ(back.strata[0].measured[3].knobs, a.table.strata[0].measured[3].knobs);
}

TEST(Hla, OneFinishedJobWithOnlyASettlingAndAPartialIntervalGivesATable) {
  Everyday e = everyday_jobs(0);  // each job: a settling interval and the tail
  e.h.runs.resize(1);
  e.h.intervals.resize(2);
  Analysis a = analyze(e.h, "one job", 12);
  EXPECT_EQ(a.pre.reinstated, 2u);
  ASSERT_EQ(a.table.strata.size(), 1u);
  const TableStratum& s = a.table.strata[0];
  ASSERT_EQ(s.measured.size(), 1u);
  EXPECT_EQ(s.measured[0].knobs.cc, 2);
  bool met = false;
  const TableEntry* t = choose(s, "throughput", 0, met);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->choice.knobs.cc, 2);
  // A job with steady intervals keeps its settling ones out.
  Everyday longer = everyday_jobs(3);
  EXPECT_EQ(analyze(longer.h, "16 jobs", 12).pre.reinstated, 0u);
  // A history whose one job failed is nothing to learn from.
  e.h.runs[0].outcome = "failed";
  EXPECT_THROW(analyze(e.h, "failed", 12), HistoryError);
}

TEST(Hla, AKnotIsItsRowsMeanWeightedByTheirTime) {
  // Two visits to cc 4: a long one (60 s at 100 Mbit/s) and a short one
  // (1 s at 200); one visit each to cc 2 and cc 8.
  Surface s;
  std::vector<std::array<double, 2>> xs = {{1, 0}, {2, 0}, {2, 0}, {3, 0}};
  std::vector<double> y = {50, 100, 200, 150}, w = {10, 60, 1, 10};
  s.fit(xs, y, 1, w);
  EXPECT_NEAR(s(2), (100 * 60 + 200 * 1) / 61.0, 1e-6);
  s.fit(xs, y, 1);  // unweighted: the plain mean
  EXPECT_NEAR(s(2), 150, 1e-6);
}

TEST(Hla, APathItsOwnJobsMeasuredIsTheMostAnyOfThemSaw) {
  // Three jobs between the same hosts measured the link at 80, 330 and 200
  // Mbit/s (each the most the interfaces received while it ran) and loss
  // 0, 0.02 and 0.01%; a fourth, to another host, was given its figures.
  Everyday e = everyday_jobs(3);
  e.h.runs.resize(4);
  const double link[4] = {80, 330, 200, 1000}, loss[4] = {0, 0.02, 0.01, 0.5};
  for (int k = 0; k < 4; ++k) {
    RunRow& r = e.h.runs[size_t(k)];
    r.source_origin = k < 3 ? "http://10.9.0.2:8081" : "https://[2001:db8::1]:443";
    r.dest_host = "dtn";
    r.link_mbps = link[k], r.loss_pct = loss[k];
    r.link_source = k < 3 ? "measured, loss measured" : "configured, loss configured";
  }
  // The slow jobs' throughput is under the measured 80 of the first: kept.
  Preprocessed p = preprocess(e.h);
  ASSERT_FALSE(p.samples.empty());
  for (const Sample& s : p.samples) {
    bool given = s.run == "dtn/job3";
    EXPECT_DOUBLE_EQ(s.link_mbps, given ? 1000 : 330) << s.run;
    EXPECT_DOUBLE_EQ(s.loss_pct, given ? 0.5 : 0.01) << s.run;
  }
  // So the three are one path in the strata.
  Strata st = stratify(p.samples, 12);
  std::set<std::string> paths;
  for (const Stratum& x : st.strata) paths.insert(x.id.substr(0, x.id.find('/')));
  EXPECT_EQ(paths.size(), 2u) << st.tree;
}

// The paths the table keeps (issue 55: a job starts from its path): each
// host pair's done runs give its link rate (the most any measured), loss
// (the median of those measured) and handshake RTT (the median); the table
// carries them, a job's first origin and this host find them whatever the
// port, and start_from_path fills what is not configured.
TEST(Hla, TheTableKeepsEachPathAsItsJobsMeasuredIt) {
  EXPECT_EQ(path_key("http://10.9.0.2:8081", "dtn"), "10.9.0.2 -> dtn");
  EXPECT_EQ(path_key("https://[2001:db8::1]:443", "dtn"), "[2001:db8::1] -> dtn");
  EXPECT_EQ(path_key("https://example.org/x", "dtn"), "example.org -> dtn");
  EXPECT_EQ(path_key("", "dtn"), "");
  Everyday e = everyday_jobs(3);
  e.h.runs.resize(5);
  const double link[5] = {80, 330, 200, 1000, 900}, loss[5] = {0, 0.02, 0.01, 0.5, 0.9}, rtt[5] = {40, 44, 42, 9, 1};
  for (int k = 0; k < 5; ++k) {
    RunRow& r = e.h.runs[size_t(k)];
    r.node = "dtn", r.run = "run" + std::to_string(k);
    r.source_origin = k < 3 ? "http://10.9.0.2:8081" : "https://[2001:db8::1]:443";
    r.dest_host = "dtn";
    r.link_mbps = link[k], r.loss_pct = loss[k], r.handshake_rtt_ms = rtt[k];
    r.link_source = k < 3 ? "measured, loss measured" : "configured, loss configured";
    r.outcome = k == 4 ? "failed" : "done";  // a failed run says nothing
    r.finished_unix = 1.7e9 + k;
  }
  std::vector<PathFacts> f = path_facts(e.h);
  ASSERT_EQ(f.size(), 2u);
  const PathFacts& lan = f[0].path == "10.9.0.2 -> dtn" ? f[0] : f[1];
  const PathFacts& given = &lan == &f[0] ? f[1] : f[0];
  EXPECT_EQ(lan.path, "10.9.0.2 -> dtn");
  EXPECT_DOUBLE_EQ(lan.link_mbps, 330);
  EXPECT_DOUBLE_EQ(lan.loss_pct, 0.01);
  EXPECT_DOUBLE_EQ(lan.rtt_ms, 42);
  EXPECT_EQ(lan.runs, 3u);
  EXPECT_DOUBLE_EQ(lan.newest_unix, 1.7e9 + 2);
  EXPECT_EQ(given.path, "[2001:db8::1] -> dtn");
  EXPECT_DOUBLE_EQ(given.link_mbps, 0);   // configured figures are no measure of the path
  EXPECT_DOUBLE_EQ(given.loss_pct, -1);

  ParamTable t;
  t.history = "everyday";
  t.paths = f;
  std::string dir = std::filesystem::temp_directory_path() / ("hla-paths-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  save_table(t, dir + "/t.json");
  ParamTable back = load_table(dir + "/t.json");
  ASSERT_EQ(back.paths.size(), 2u);
  const PathFacts* found = find_path(back, "http://10.9.0.2:9000", "dtn");  // another port of the host
  ASSERT_NE(found, nullptr);
  EXPECT_DOUBLE_EQ(found->link_mbps, 330);
  EXPECT_EQ(find_path(back, "http://10.9.0.3:8081", "dtn"), nullptr);
  EXPECT_EQ(find_path(back, "http://10.9.0.2:8081", "other"), nullptr);

  xfer::EngineOptions o;
  std::string said = xfer::start_from_path(o, back, "http://10.9.0.2:8081", "dtn", 1.7e9 + 2 + 3 * 86400);
  EXPECT_DOUBLE_EQ(o.path_link_mbps, 330);
  EXPECT_DOUBLE_EQ(o.path_loss_pct, 0.01);
  EXPECT_NE(said.find("link 330 Mbit/s, loss 0.01%"), std::string::npos) << said;
  EXPECT_NE(said.find("3 runs, the newest 3 days ago"), std::string::npos) << said;
  xfer::EngineOptions configured;
  configured.bandwidth_configured = true;
  xfer::start_from_path(configured, back, "http://10.9.0.2:8081", "dtn", 1.7e9);
  EXPECT_DOUBLE_EQ(configured.path_link_mbps, 0);  // a configured link stands
  EXPECT_DOUBLE_EQ(configured.path_loss_pct, 0.01);
  xfer::EngineOptions none;
  EXPECT_EQ(xfer::start_from_path(none, back, "http://[2001:db8::1]:443", "dtn", 1.7e9), "");  // nothing measured
  EXPECT_EQ(xfer::start_from_path(none, back, "http://elsewhere", "dtn", 1.7e9), "");
  EXPECT_DOUBLE_EQ(none.path_link_mbps, 0);
  EXPECT_TRUE(none.path_known.empty());

  // A table written before paths were kept loads; a path's figure out of
  // range is refused by name.
  nlohmann::json j = to_json(t);
  j.erase("paths");
  EXPECT_TRUE(table_from_json(j).paths.empty());
  j = to_json(t);
  j["paths"][1]["loss_pct"] = 200;
  try {
    table_from_json(j);
    ADD_FAILURE() << "a loss of 200% loaded";
  } catch (const TableError& err) {
    EXPECT_NE(std::string(err.what()).find("path 2: 'loss_pct' = 200 is outside"), std::string::npos) << err.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Hla, SurfacesThatMissAWellMeasuredSettingAreNotTrusted) {
  // On h2 a connection's requests in flight are what count: cc 1 with 32 in
  // flight is fast, cc 1 with one is slow. The additive parts (cc, then pp)
  // cannot hold that: their sum puts cc 1 pp 1 near the average.
  HistoryData h;
  struct Point {
    int cc, pp;
    double mbps;
  };
  const std::vector<Point> points = {{1, 1, 6}, {1, 32, 250}, {8, 1, 45}, {32, 1, 175}, {32, 32, 295}, {8, 32, 280}};
  int n = 0;
  for (int visit = 0; visit < 3; ++visit)
    for (const Point& pt : points) {
      RunRow r;
      r.node = "dtn", r.run = "job" + std::to_string(n++), r.outcome = "done", r.link_mbps = 350, r.handshake_rtt_ms = 70;
      h.runs.push_back(r);
      for (int seq = 0; seq < 4; ++seq) {
        IntervalRow i;
        i.node = r.node, i.run = r.run, i.seq = seq, i.cc = pt.cc, i.pp = pt.pp, i.cores = 1, i.settling = seq == 0;
        i.interval_s = 1;
        double mbps = pt.mbps * (1 + 0.02 * ((seq + visit) % 3 - 1));
        i.throughput_bps = mbps * 1e6, i.bytes_interval = int64_t(mbps * 1e6 / 8);
        i.dynamic_joules = (100 + 1000 / mbps) * double(i.bytes_interval) / 1e9;
        i.chunk_files = 400, i.chunk_bytes = 40'000'000, i.chunk_size_mean = 1e5, i.chunk_size_sd = 2e4;
        h.intervals.push_back(i);
      }
    }
  Analysis a = analyze(h, "h2", 6);
  ASSERT_EQ(a.table.strata.size(), 1u) << a.strata.tree;
  const TableStratum& s = a.table.strata[0];
  ASSERT_TRUE(a.models[0].fitted);
  EXPECT_GT(std::abs(a.models[0].throughput({1, 1, 1, 1, 0}) - 6), 3.0) << "the additive sum does miss it here";
  EXPECT_EQ(s.decided, "measured") << s.why;
  EXPECT_NE(s.why.find("well-measured"), std::string::npos) << s.why;
  // And least energy is a setting that was measured, never cc 1 pp 1's 6 Mbit/s promised as 130.
  bool met = false;
  const TableEntry* e = choose(s, "throughput", 100, met);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(met);
  EXPECT_GE(e->choice.mbps, 100);
  EXPECT_FALSE(e->choice.knobs.cc == 1 && e->choice.knobs.pp == 1);
}
