// Steps 3 and 4 of the offline analysis: spline surfaces (eq. 3-9) and the
// SLA optimisation (eq. 10, 11) with the second-derivative test (hla.h).
#include <libalglib/interpolation.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "xfer/hla.h"

namespace xfer::hla {

struct Surface::Impl {
  alglib::spline1dinterpolant s1;
  alglib::spline2dinterpolant s2;
  int active = 0;  // a curve: which coordinate it runs over
};

namespace {

double clamp_to(double v, const std::vector<double>& levels) {
  if (levels.empty()) return v;
  return std::clamp(v, levels.front(), levels.back());
}

std::vector<double> distinct(std::vector<double> v) {
  for (double& x : v) x = std::round(x * 1e9) / 1e9;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

size_t index_of(const std::vector<double>& levels, double v) {
  return size_t(std::lower_bound(levels.begin(), levels.end(), std::round(v * 1e9) / 1e9 - 1e-12) - levels.begin());
}

}  // namespace

void Surface::fit(const std::vector<std::array<double, 2>>& xs, const std::vector<double>& y, int dims,
                  const std::vector<double>& w) {
  auto weight = [&](size_t i) { return w.empty() ? 1.0 : w[i]; };
  dims_ = dims;
  impl_ = std::make_shared<Impl>();
  for (int d = 0; d < 2; ++d) {
    std::vector<double> v;
    if (d < dims)
      for (const auto& x : xs) v.push_back(x[size_t(d)]);
    levels_[size_t(d)] = distinct(v);
  }
  double ws = 0, wy = 0;
  for (size_t i = 0; i < y.size(); ++i) ws += weight(i), wy += weight(i) * y[i];
  constant_ = ws > 0 ? wy / ws : 0;
  size_t n0 = levels_[0].size(), n1 = dims == 2 ? levels_[1].size() : 1;
  // Mean value per distinct point (the knots).
  std::vector<double> sum(n0 * n1, 0), cnt(n0 * n1, 0);
  for (size_t i = 0; i < xs.size(); ++i) {
    size_t a = index_of(levels_[0], xs[i][0]), b = dims == 2 ? index_of(levels_[1], xs[i][1]) : 0;
    sum[b * n0 + a] += weight(i) * y[i];
    cnt[b * n0 + a] += weight(i);
  }
  auto curve = [&](int active, const std::vector<double>& x, const std::vector<double>& v) {
    alglib::real_1d_array ax, ay;
    ax.setcontent(alglib::ae_int_t(x.size()), x.data());
    ay.setcontent(alglib::ae_int_t(v.size()), v.data());
    // Natural end conditions: zero second derivative at both ends (eq. 9).
    alglib::spline1dbuildcubic(ax, ay, alglib::ae_int_t(x.size()), 2, 0.0, 2, 0.0, impl_->s1);
    impl_->active = active;
    kind_ = Kind::Curve;
  };
  if (n0 < 2 && n1 < 2) {
    kind_ = Kind::Constant;
    return;
  }
  if (n1 < 2 || n0 < 2) {
    // One coordinate has a single level: a curve over the other.
    int active = n0 >= 2 ? 0 : 1;
    size_t n = active == 0 ? n0 : n1;
    std::vector<double> v(n, 0), c(n, 0);
    for (size_t b = 0; b < n1; ++b)
      for (size_t a = 0; a < n0; ++a) {
        size_t k = active == 0 ? a : b;
        v[k] += sum[b * n0 + a];
        c[k] += cnt[b * n0 + a];
      }
    for (size_t k = 0; k < n; ++k) v[k] /= c[k];
    curve(active, levels_[size_t(active)], v);
    return;
  }
  // A bicubic spline through the grid of knots; a cell the history lacks
  // gets the additive estimate from its row's and column's means.
  std::vector<double> row(n1, 0), rc(n1, 0), col(n0, 0), cc(n0, 0);
  double all = 0, ac = 0;
  for (size_t b = 0; b < n1; ++b)
    for (size_t a = 0; a < n0; ++a)
      if (cnt[b * n0 + a] > 0) {
        double m = sum[b * n0 + a] / cnt[b * n0 + a];
        row[b] += m, rc[b] += 1, col[a] += m, cc[a] += 1, all += m, ac += 1;
      }
  std::vector<double> f(n0 * n1);
  for (size_t b = 0; b < n1; ++b)
    for (size_t a = 0; a < n0; ++a)
      f[b * n0 + a] = cnt[b * n0 + a] > 0 ? sum[b * n0 + a] / cnt[b * n0 + a]
                                           : row[b] / rc[b] + col[a] / cc[a] - all / ac;
  alglib::real_1d_array ax, ay, af;
  ax.setcontent(alglib::ae_int_t(n0), levels_[0].data());
  ay.setcontent(alglib::ae_int_t(n1), levels_[1].data());
  af.setcontent(alglib::ae_int_t(f.size()), f.data());
  alglib::spline2dbuildbicubicv(ax, alglib::ae_int_t(n0), ay, alglib::ae_int_t(n1), af, 1, impl_->s2);
  kind_ = Kind::Surface;
}

double Surface::operator()(double x, double y) const {
  switch (kind_) {
    case Kind::Constant: return constant_;
    case Kind::Curve: {
      double v = impl_->active == 0 ? x : y;
      return alglib::spline1dcalc(impl_->s1, clamp_to(v, levels_[size_t(impl_->active)]));
    }
    case Kind::Surface: return alglib::spline2dcalc(impl_->s2, clamp_to(x, levels_[0]), clamp_to(y, levels_[1]));
  }
  return constant_;
}

void Surface::derivatives(double x, double y, std::array<double, 2>& g, std::array<double, 4>& h) const {
  g = {0, 0};
  h = {0, 0, 0, 0};
  if (kind_ == Kind::Curve) {
    int a = impl_->active;
    double s, ds, d2s;
    alglib::spline1ddiff(impl_->s1, clamp_to(a == 0 ? x : y, levels_[size_t(a)]), s, ds, d2s);
    g[size_t(a)] = ds;
    h[size_t(a * 3)] = d2s;  // h[0] (xx) or h[3] (yy)
  } else if (kind_ == Kind::Surface) {
    double f, fx, fy, fxy;
    x = clamp_to(x, levels_[0]), y = clamp_to(y, levels_[1]);
    alglib::spline2ddiff(impl_->s2, x, y, f, fx, fy, fxy);
    g = {fx, fy};
    // ALGLIB gives the mixed derivative; the pure second derivatives are
    // central differences of the first.
    auto d1 = [&](double px, double py, int which) {
      double a, bx, by, bxy;
      alglib::spline2ddiff(impl_->s2, px, py, a, bx, by, bxy);
      return which == 0 ? bx : by;
    };
    double hx = 1e-4 * std::max(1e-9, hi(0) - lo(0)), hy = 1e-4 * std::max(1e-9, hi(1) - lo(1));
    double x0 = std::max(lo(0), x - hx), x1 = std::min(hi(0), x + hx);
    double y0 = std::max(lo(1), y - hy), y1 = std::min(hi(1), y + hy);
    double fxx = x1 > x0 ? (d1(x1, y, 0) - d1(x0, y, 0)) / (x1 - x0) : 0;
    double fyy = y1 > y0 ? (d1(x, y1, 1) - d1(x, y0, 1)) / (y1 - y0) : 0;
    h = {fxx, fxy, fxy, fyy};
  }
}

std::vector<Surface::Extremum> Surface::extrema() const {
  std::vector<Extremum> out;
  if (kind_ == Kind::Constant) return out;
  int dims = kind_ == Kind::Surface ? 2 : 1;
  int a = kind_ == Kind::Curve ? impl_->active : 0;
  const int n = dims == 2 ? 25 : 65;
  auto at = [&](int i, int j) {
    std::array<double, 2> p{0, 0};
    if (dims == 2) {
      p[0] = lo(0) + (hi(0) - lo(0)) * i / (n - 1);
      p[1] = lo(1) + (hi(1) - lo(1)) * j / (n - 1);
    } else {
      p[size_t(a)] = lo(a) + (hi(a) - lo(a)) * i / (n - 1);
    }
    return p;
  };
  auto val = [&](const std::array<double, 2>& p) { return (*this)(p[0], p[1]); };
  for (int i = 1; i < n - 1; ++i)
    for (int j = dims == 2 ? 1 : 0; j < (dims == 2 ? n - 1 : 1); ++j) {
      std::array<double, 2> p = at(i, j);
      double v = val(p);
      bool is_min = true, is_max = true;
      for (int di = -1; di <= 1; ++di)
        for (int dj = (dims == 2 ? -1 : 0); dj <= (dims == 2 ? 1 : 0); ++dj) {
          if (!di && !dj) continue;
          double w = val(at(i + di, j + dj));
          is_min &= v < w;
          is_max &= v > w;
        }
      if (!is_min && !is_max) continue;
      // Newton steps on the gradient, kept inside the knots.
      for (int it = 0; it < 8; ++it) {
        std::array<double, 2> g;
        std::array<double, 4> h;
        derivatives(p[0], p[1], g, h);
        if (dims == 2) {
          Eigen::Matrix2d H;
          H << h[0], h[1], h[2], h[3];
          Eigen::Vector2d step = H.colPivHouseholderQr().solve(Eigen::Vector2d(g[0], g[1]));
          if (!step.allFinite()) break;
          p[0] = std::clamp(p[0] - step[0], lo(0), hi(0));
          p[1] = std::clamp(p[1] - step[1], lo(1), hi(1));
        } else {
          double d2 = h[size_t(a * 3)];
          if (d2 == 0) break;
          p[size_t(a)] = std::clamp(p[size_t(a)] - g[size_t(a)] / d2, lo(a), hi(a));
        }
      }
      // The second-derivative test: the Hessian's eigenvalues.
      std::array<double, 2> g;
      std::array<double, 4> h;
      derivatives(p[0], p[1], g, h);
      Extremum e;
      e.x = p[0], e.y = p[1], e.value = val(p);
      if (dims == 2) {
        Eigen::Matrix2d H;
        H << h[0], h[1], h[2], h[3];
        Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d> es(H);
        Eigen::Vector2d ev = es.eigenvalues();
        if (ev.minCoeff() > 0) e.minimum = true;        // positive definite: a local minimum
        else if (ev.maxCoeff() < 0) e.minimum = false;  // negative definite: a local maximum
        else continue;                                  // indefinite or flat: a saddle, no extremum
      } else {
        double d2 = h[size_t(a * 3)];
        if (d2 > 0) e.minimum = true;
        else if (d2 < 0) e.minimum = false;
        else continue;
      }
      bool dup = false;
      for (const Extremum& o : out) dup |= std::abs(o.x - e.x) < 1e-3 && std::abs(o.y - e.y) < 1e-3;
      if (!dup) out.push_back(e);
    }
  return out;
}

std::array<double, 2> StratumModel::coords(int i, const Knobs& k) {
  switch (i) {
    case 0: return {double(k.cores), double(k.freq_khz) / 1e6};
    case 1: return {std::log2(double(k.cc)), std::log2(double(k.p))};
    default: return {std::log2(double(k.pp)), 0};
  }
}

namespace {

Knobs knobs_of(const Sample& s) { return {s.cc, s.p, s.pp, s.cores, s.freq_khz}; }

// The model: log y = mean + sum_k (S_k(x_k) - off_k), fitted by
// backfitting, so y is the product of the three surfaces' factors (issue
// 55). Rows weighted by w (their time: a long visit counts as much as its
// many short ones would). A sum in y itself cannot say that throughput
// grows with the requests in flight (cc x pp): fitted to a sweep, it put
// cheap corners at the sum of the gains seen alone, and 11 of 63 stratum
// analyses of the learning bench rejected their surfaces.
double weighted_mean(const std::vector<double>& y, const std::vector<double>& w) {
  double sw = 0, sy = 0;
  for (size_t i = 0; i < y.size(); ++i) sw += w[i], sy += w[i] * y[i];
  return sw > 0 ? sy / sw : 0;
}

void backfit(const std::vector<Knobs>& k, const std::vector<double>& y, const std::vector<double>& w, double& mean,
             std::array<Surface, 3>& s, std::array<double, 3>& off) {
  size_t n = y.size();
  mean = weighted_mean(y, w);
  std::array<std::vector<double>, 3> part;
  for (auto& p : part) p.assign(n, 0);
  const int dims[3] = {2, 2, 1};
  for (int round = 0; round < 8; ++round)
    for (int j = 0; j < 3; ++j) {
      std::vector<std::array<double, 2>> xs(n);
      std::vector<double> r(n);
      for (size_t i = 0; i < n; ++i) {
        xs[i] = StratumModel::coords(j, k[i]);
        r[i] = y[i] - mean;
        for (int o = 0; o < 3; ++o)
          if (o != j) r[i] -= part[size_t(o)][i];
      }
      s[size_t(j)].fit(xs, r, dims[j], w);
      for (size_t i = 0; i < n; ++i) part[size_t(j)][i] = s[size_t(j)](xs[i][0], xs[i][1]);
      double m = weighted_mean(part[size_t(j)], w);
      for (size_t i = 0; i < n; ++i) part[size_t(j)][i] -= m;
      off[size_t(j)] = m;
    }
  // The surfaces as the paper draws them, each with the others at their
  // mean: log of the value (mean + deviation; the plots draw exp of it).
  for (int j = 0; j < 3; ++j) {
    std::vector<std::array<double, 2>> xs(n);
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) {
      xs[i] = StratumModel::coords(j, k[i]);
      v[i] = mean + s[size_t(j)](xs[i][0], xs[i][1]) - off[size_t(j)];
    }
    s[size_t(j)].fit(xs, v, dims[j], w);
    off[size_t(j)] = mean;
  }
}

// log y at k.
double predict_log(double mean, const std::array<Surface, 3>& s, const std::array<double, 3>& off, const Knobs& k) {
  double v = mean;
  for (int j = 0; j < 3; ++j) {
    auto c = StratumModel::coords(j, k);
    v += s[size_t(j)](c[0], c[1]) - off[size_t(j)];
  }
  return v;
}

std::vector<double> logs(const std::vector<double>& y) {
  std::vector<double> out(y.size());
  for (size_t i = 0; i < y.size(); ++i) out[i] = std::log(std::max(y[i], 1e-9));
  return out;
}

// Per surface: how far it is from the held-out rows at its own points (the
// other surfaces' factors divided out), RMSE over the points weighted by
// rows, in log units (a relative error); and the whole model's RMSE per row,
// relative to the rows' mean. (y: the values; the model is in their log.)
void held_out(const std::vector<Knobs>& k, const std::vector<double>& y, const std::vector<double>& wt, double mean,
              const std::array<Surface, 3>& s, const std::array<double, 3>& off, std::array<double, 3>& per_surface,
              double& rows) {
  size_t n = y.size();
  double se = 0, sw = 0;
  for (size_t i = 0; i < n; ++i) se += wt[i] * std::pow(y[i] - std::exp(predict_log(mean, s, off, k[i])), 2), sw += wt[i];
  const double ym = weighted_mean(y, wt);
  rows = sw > 0 && ym != 0 ? std::sqrt(se / sw) / std::abs(ym) : 0;
  const std::vector<double> ly = logs(y);
  for (int j = 0; j < 3; ++j) {
    std::map<std::array<double, 2>, std::pair<double, double>> at;  // point -> (sum of partial residuals, rows)
    for (size_t i = 0; i < n; ++i) {
      double r = ly[i];
      for (int o = 0; o < 3; ++o) {
        auto c = StratumModel::coords(o, k[i]);
        if (o != j) r -= s[size_t(o)](c[0], c[1]) - off[size_t(o)];
      }
      auto& cell = at[StratumModel::coords(j, k[i])];
      cell.first += wt[i] * r, cell.second += wt[i];
    }
    double sq = 0, w = 0;
    for (auto& [c, v] : at) {
      if (v.second <= 0) continue;
      double want = v.first / v.second, got = s[size_t(j)](c[0], c[1]) - off[size_t(j)] + mean;
      sq += v.second * (want - got) * (want - got), w += v.second;
    }
    per_surface[size_t(j)] = w > 0 ? std::sqrt(sq / w) : 0;
  }
}

// Pooled within-setting sd of the samples, relative to their mean.
template <typename F>
double repeat_scatter(const std::vector<Sample>& s, const std::vector<size_t>& rows, F value) {
  std::map<std::tuple<int, int, int, int, long>, std::vector<double>> by;
  double all = 0;
  for (size_t r : rows) {
    by[{s[r].cc, s[r].p, s[r].pp, s[r].cores, s[r].freq_khz}].push_back(value(s[r]));
    all += value(s[r]);
  }
  double ss = 0, dof = 0;
  for (auto& [k, v] : by) {
    if (v.size() < 2) continue;
    double m = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
    for (double x : v) ss += (x - m) * (x - m);
    dof += double(v.size() - 1);
  }
  double mean = rows.empty() ? 0 : all / double(rows.size());
  return dof > 0 && mean != 0 ? std::sqrt(ss / dof) / std::abs(mean) : 0;
}

}  // namespace

double StratumModel::throughput(const Knobs& k) const {
  double v = std::exp(predict_log(mean_t, t, t_off, k));
  return t_cap > 0 ? std::min(v, t_cap) : v;
}
double StratumModel::bounded_throughput(const Knobs& k) const {
  auto in_flight = [](const Knobs& x) { return double(x.cc) * x.p * x.pp; };
  double fewer = 0, fastest = 0;  // Mbit/s per request in flight
  for (const MeasuredSetting& x : measured) {
    if (x.mbps <= 0) continue;
    double per = x.mbps / in_flight(x.knobs);
    fastest = std::max(fastest, per);
    if (in_flight(x.knobs) <= in_flight(k)) fewer = std::max(fewer, per);
  }
  double per = fewer > 0 ? fewer : fastest;
  double v = throughput(k);
  return per > 0 ? std::min(v, per * in_flight(k) * (1 + std::max(repeat_t, kTie))) : v;
}
double StratumModel::energy(const Knobs& k) const {
  return has_energy ? std::max(e_floor, std::exp(predict_log(mean_e, e, e_off, k))) : 0;
}
double StratumModel::bounded_energy(const Knobs& k) const {
  double v = energy(k);
  if (!has_energy) return v;
  double t = throughput(k), cut = bounded_throughput(k);
  if (!(cut < t) || cut <= 0) return v;
  if (!time_cost.fitted) return v * t / cut;
  double per_s = time_cost.per_s + time_cost.per_conn_s * double(k.cc) * k.p;
  return v + per_s * 8000 * (1 / cut - 1 / t);  // 8000 Mbit a GB
}

StratumModel::TimeCost fit_time_cost(const std::vector<Sample>& s, const std::vector<size_t>& rows) {
  StratumModel::TimeCost out;
  std::vector<size_t> use;
  for (size_t r : rows)
    if (s[r].j_per_gb && s[r].mbps > 0) use.push_back(r);
  out.settings = measured_settings(s, use).size();
  if (out.settings < kMinTimeCostSettings) return out;
  // Columns: 1, seconds a GB, connection-seconds a GB; rows weighted by
  // their seconds (as the surfaces weigh them).
  Eigen::MatrixXd x(use.size(), 3);
  Eigen::VectorXd y(use.size());
  for (size_t i = 0; i < use.size(); ++i) {
    const Sample& r = s[use[i]];
    double w = std::sqrt(r.seconds > 0 ? r.seconds : 1.0), per_gb_s = 8000 / r.mbps;
    x.row(Eigen::Index(i)) << w, w * per_gb_s, w * per_gb_s * r.cc * r.p;
    y(Eigen::Index(i)) = w * *r.j_per_gb;
  }
  // No cost below zero: the least squares over each subset of the
  // columns, the best whose coefficients are all at least zero (three
  // columns: seven subsets; the mean alone always qualifies).
  double best = std::numeric_limits<double>::infinity();
  std::array<double, 3> coef{};
  for (int mask = 1; mask < 8; ++mask) {
    std::vector<Eigen::Index> cols;
    for (Eigen::Index c = 0; c < 3; ++c)
      if (mask & (1 << c)) cols.push_back(c);
    Eigen::MatrixXd xs(x.rows(), Eigen::Index(cols.size()));
    for (size_t c = 0; c < cols.size(); ++c) xs.col(Eigen::Index(c)) = x.col(cols[c]);
    Eigen::VectorXd b = xs.colPivHouseholderQr().solve(y);
    if ((b.array() < 0).any() || !b.allFinite()) continue;
    double sse = (xs * b - y).squaredNorm();
    if (sse >= best) continue;
    best = sse, coef = {};
    for (size_t c = 0; c < cols.size(); ++c) coef[size_t(cols[c])] = b(Eigen::Index(c));
  }
  out.fitted = std::isfinite(best);
  out.per_gb = coef[0], out.per_s = coef[1], out.per_conn_s = coef[2];
  return out;
}

StratumModel fit_stratum(const std::vector<Sample>& s, const std::vector<size_t>& rows, uint64_t seed) {
  StratumModel m;
  std::vector<size_t> order = rows;
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  size_t n_train = std::max<size_t>(1, (order.size() * 7 + 9) / 10);
  if (order.size() >= 2) n_train = std::min(n_train, order.size() - 1);
  std::vector<Knobs> ktr, kte;
  std::vector<double> ttr, tte, etr, ete, wtr, wte;
  m.has_energy = std::all_of(rows.begin(), rows.end(), [&](size_t r) { return s[r].j_per_gb.has_value(); });
  for (size_t i = 0; i < order.size(); ++i) {
    const Sample& x = s[order[i]];
    bool train = i < n_train;
    (train ? ktr : kte).push_back(knobs_of(x));
    (train ? ttr : tte).push_back(x.mbps);
    (train ? wtr : wte).push_back(x.seconds > 0 ? x.seconds : 1.0);
    if (m.has_energy) (train ? etr : ete).push_back(*x.j_per_gb);
  }
  m.train_rows = ktr.size(), m.test_rows = kte.size();
  for (size_t r : rows) m.t_cap = std::max(m.t_cap, s[r].link_mbps);
  m.measured = measured_settings(s, rows);
  if (m.has_energy) m.time_cost = fit_time_cost(s, rows);
  if (!ttr.empty()) m.t_floor = *std::min_element(ttr.begin(), ttr.end());
  if (m.has_energy) {
    m.e_floor = 1e300;
    for (double e : etr) m.e_floor = std::min(m.e_floor, e);
    if (etr.empty()) m.e_floor = 0;
  }
  if (ktr.empty()) return m;
  m.repeat_t = repeat_scatter(s, rows, [](const Sample& x) { return x.mbps; });
  if (m.has_energy) m.repeat_e = repeat_scatter(s, rows, [](const Sample& x) { return *x.j_per_gb; });
  m.fitted = true;
  backfit(ktr, logs(ttr), wtr, m.mean_t, m.t, m.t_off);
  held_out(kte, tte, wte, m.mean_t, m.t, m.t_off, m.rmse_t, m.rmse_t_rows);
  if (m.has_energy) {
    backfit(ktr, logs(etr), wtr, m.mean_e, m.e, m.e_off);
    held_out(kte, ete, wte, m.mean_e, m.e, m.e_off, m.rmse_e, m.rmse_e_rows);
  }
  m.one_frequency = m.t[0].levels(1).size() < 2;
  return m;
}

namespace {

// Whole values from a surface's least knot to its greatest (knots in log2
// when `log`): every one while there are at most `most`, else `most` spread
// evenly in the surface's own coordinate; the knots themselves always.
void fill(std::set<int>& out, const std::vector<double>& knots, bool log, size_t most) {
  if (knots.empty()) return;
  auto value = [&](double x) { return std::max(1, int(std::lround(log ? std::exp2(x) : x))); };
  for (double k : knots) out.insert(value(k));
  int lo = value(knots.front()), hi = value(knots.back());
  if (size_t(hi - lo) + 1 <= most) {
    for (int v = lo; v <= hi; ++v) out.insert(v);
    return;
  }
  for (size_t i = 0; i < most; ++i)
    out.insert(value(knots.front() + (knots.back() - knots.front()) * double(i) / double(std::max<size_t>(1, most - 1))));
}

}  // namespace

std::vector<Knobs> candidates(const StratumModel& m) {
  // eq. 10 / 11 are solved on the surfaces, not on the history's own
  // settings: "uniform sampling ... to predict the previously missing
  // parameters" (cross-layer-hla §III-A). Every whole cc, p, pp and core
  // count between the knots (spread evenly in the surfaces' coordinate past
  // kMaxCandidates), the knots and the surfaces' interior extrema; the
  // frequencies the history has (a driver offers those levels only).
  std::set<int> cc, p, pp, cores;
  std::set<long> freq;
  std::array<size_t, 4> most{64, 16, 32, 16};
  auto count = [&] {
    auto n = [](size_t want, const std::vector<double>& knots, bool log) -> double {
      if (knots.empty()) return 1;
      double span = (log ? std::exp2(knots.back()) - std::exp2(knots.front()) : knots.back() - knots.front()) + 1;
      return std::min(double(want), span) + double(knots.size());
    };
    return n(most[0], m.t[1].levels(0), true) * n(most[1], m.t[1].levels(1), true) *
           n(most[2], m.t[2].levels(0), true) * n(most[3], m.t[0].levels(0), false) *
           double(std::max<size_t>(1, m.t[0].levels(1).size()));
  };
  while (count() > double(kMaxCandidates) && *std::max_element(most.begin(), most.end()) > 4)
    *std::max_element(most.begin(), most.end()) /= 2;
  fill(cc, m.t[1].levels(0), true, most[0]);
  fill(p, m.t[1].levels(1), true, most[1]);
  fill(pp, m.t[2].levels(0), true, most[2]);
  fill(cores, m.t[0].levels(0), false, most[3]);
  for (double v : m.t[0].levels(1)) freq.insert(long(std::lround(v * 1e6)));
  for (const auto* set : {&m.t, &m.e}) {
    if (set == &m.e && !m.has_energy) continue;
    for (const auto& e : (*set)[1].extrema()) {
      cc.insert(std::max(1, int(std::lround(std::exp2(e.x))))), p.insert(std::max(1, int(std::lround(std::exp2(e.y)))));
    }
    for (const auto& e : (*set)[2].extrema()) pp.insert(std::max(1, int(std::lround(std::exp2(e.x)))));
    for (const auto& e : (*set)[0].extrema()) cores.insert(std::max(1, int(std::lround(e.x))));
  }
  if (cc.empty()) cc.insert(1);
  if (p.empty()) p.insert(1);
  if (pp.empty()) pp.insert(1);
  if (cores.empty()) cores.insert(1);
  if (freq.empty()) freq.insert(0);
  std::vector<Knobs> all, near, out;
  for (int a : cc)
    for (int b : p)
      for (int c : pp)
        for (int d : cores)
          for (long f : freq) all.push_back({a, b, c, d, f});
  for (const Knobs& k : all)
    if (std::any_of(m.measured.begin(), m.measured.end(),
                    [&](const MeasuredSetting& x) { return knob_distance(k, x.knobs) <= kNearMeasured + 1e-9; }))
      near.push_back(k);
  if (near.empty()) near = std::move(all);
  for (const Knobs& k : near)
    if (m.throughput(k) >= m.t_floor) out.push_back(k);
  return out.empty() ? near : out;
}

double knob_distance(const Knobs& a, const Knobs& b) {
  auto d = [](double x, double y) { return x > 0 && y > 0 ? std::abs(std::log2(x / y)) : 0.0; };
  return d(a.cc, b.cc) + d(a.p, b.p) + d(a.pp, b.pp) + d(a.cores, b.cores) + d(double(a.freq_khz), double(b.freq_khz));
}

std::vector<Choice> evaluate(const StratumModel& m, const std::vector<Knobs>& c) {
  std::vector<Choice> out;
  out.reserve(c.size());
  for (const Knobs& k : c) out.push_back({k, m.bounded_throughput(k), m.bounded_energy(k), true});
  return out;
}

namespace {

// What a setting costs the machine: channels (cc x p), then cores, then
// requests in flight, then frequency.
std::tuple<int, int, int, long> cost(const Knobs& k) { return {k.cc * k.p, k.cores, k.pp, k.freq_khz}; }

// The rule of kTie: x replaces the winner w when it is within the tie of the
// best objective and cheaper (or as cheap and better).
bool preferred(const Choice& x, double ox, const Choice* w, double ow) {
  return !w || cost(x.knobs) < cost(w->knobs) || (cost(x.knobs) == cost(w->knobs) && ox > ow);
}

// Among the feasible candidates, those whose objective (higher is better)
// is within kTie of the best are equals; the cheapest of them wins.
template <typename Feasible, typename Objective>
Choice pick(const std::vector<Choice>& c, Feasible feasible, Objective objective) {
  double best = -1e300;
  bool any = false;
  for (const Choice& x : c)
    if (feasible(x)) best = std::max(best, objective(x)), any = true;
  const Choice* w = nullptr;
  if (!any) return {};
  for (const Choice& x : c) {
    if (!feasible(x) || objective(x) < best - kTie * std::abs(best)) continue;
    if (preferred(x, objective(x), w, w ? objective(*w) : 0)) w = &x;
  }
  Choice out = *w;
  out.feasible = true;
  return out;
}

// One of eq. 10 / 11 at every bound at once. `order` lists the candidates as
// the bound admits them (eq. 10: by throughput, highest first, as the floor
// falls; eq. 11: by energy, least first, as the ceiling rises); `gate` is
// the figure the bound is compared with. After each group of equal gates
// the winner is the answer for every bound up to the next gate: an entry is
// written where the answer changes, with the bound at which it starts.
template <typename Gate, typename Objective>
std::vector<std::pair<double, Choice>> sweep(std::vector<Choice> order, Gate gate, Objective objective) {
  std::vector<std::pair<double, Choice>> out;
  double best = -1e300;
  size_t winner = order.size();
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    for (; j < order.size() && gate(order[j]) == gate(order[i]); ++j) {
      double o = objective(order[j]);
      if (o > best) {
        // A new best moves the window of equals: the winner is chosen again
        // among everything admitted so far.
        best = o, winner = order.size();
        for (size_t k = 0; k <= j; ++k)
          if (objective(order[k]) >= best - kTie * std::abs(best) &&
              preferred(order[k], objective(order[k]), winner < order.size() ? &order[winner] : nullptr,
                        winner < order.size() ? objective(order[winner]) : 0))
            winner = k;
      } else if (o >= best - kTie * std::abs(best) && preferred(order[j], o, &order[winner], objective(order[winner]))) {
        winner = j;
      }
    }
    if (out.empty() || !(out.back().second.knobs == order[winner].knobs)) out.push_back({gate(order[i]), order[winner]});
    i = j;
  }
  return out;
}

}  // namespace

Choice least_energy(const StratumModel& m, const std::vector<Knobs>& c, double t_sla) {
  std::vector<Choice> all = evaluate(m, c);
  Choice best = pick(all, [&](const Choice& x) { return x.mbps >= t_sla; }, [](const Choice& x) { return -x.j_per_gb; });
  if (best.feasible) return best;
  Choice fallback;
  for (const Choice& x : all)
    if (fallback.mbps == 0 || x.mbps > fallback.mbps) fallback = x, fallback.feasible = false;
  return fallback;
}

Choice most_throughput(const StratumModel& m, const std::vector<Knobs>& c, double e_sla) {
  std::vector<Choice> all = evaluate(m, c);
  Choice best = pick(all, [&](const Choice& x) { return x.j_per_gb <= e_sla; }, [](const Choice& x) { return x.mbps; });
  if (best.feasible) return best;
  Choice fallback;
  bool any = false;
  for (const Choice& x : all)
    if (!any || x.j_per_gb < fallback.j_per_gb) fallback = x, fallback.feasible = false, any = true;
  return fallback;
}

std::vector<TableEntry> sla_entries(const StratumModel& m, const std::vector<Knobs>& c) {
  return sla_entries(evaluate(m, c), m.has_energy);
}

std::vector<TableEntry> sla_entries(const std::vector<Choice>& all, bool has_energy) {
  std::vector<TableEntry> out;
  if (all.empty()) return out;
  std::vector<Choice> by_t = all;
  std::stable_sort(by_t.begin(), by_t.end(), [](const Choice& a, const Choice& b) { return a.mbps > b.mbps; });
  double t_max = by_t.front().mbps;
  auto floors = sweep(by_t, [](const Choice& x) { return x.mbps; }, [](const Choice& x) { return -x.j_per_gb; });
  // Written as the floor falls; kept as it rises (choose() reads them so).
  for (auto it = floors.rbegin(); it != floors.rend(); ++it)
    out.push_back({"throughput", t_max > 0 ? it->first / t_max : 0, it->first, it->second});
  if (!has_energy) return out;
  std::vector<Choice> by_e = all;
  std::stable_sort(by_e.begin(), by_e.end(), [](const Choice& a, const Choice& b) { return a.j_per_gb < b.j_per_gb; });
  double e_min = by_e.front().j_per_gb;
  for (auto& [bound, choice] : sweep(by_e, [](const Choice& x) { return x.j_per_gb; }, [](const Choice& x) { return x.mbps; }))
    out.push_back({"energy", e_min > 0 ? bound / e_min : 0, bound, choice});
  return out;
}

std::vector<Knobs> schedule_mixed(std::vector<Knobs> per_chunk, int max_channels) {
  int sum = 0;
  for (const Knobs& k : per_chunk) sum += k.cc;
  if (sum <= max_channels || sum == 0) return per_chunk;
  // FastHLA Algorithm 1, line 7: theta_i x limit / sum(theta), at least one each.
  for (Knobs& k : per_chunk) k.cc = std::max(1, int(std::floor(double(k.cc) * max_channels / sum)));
  return per_chunk;
}

}  // namespace xfer::hla
