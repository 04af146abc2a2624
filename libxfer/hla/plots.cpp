// Pictures of the analysis (SVG): per stratum, throughput and energy over
// (cc, p) as heatmaps and over cores as curves, the table's choices marked.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "xfer/hla.h"
#include "xfer/text.h"

namespace xfer::hla {

namespace {

std::string color(double f) {  // 0..1 -> dark blue .. yellow
  f = std::clamp(f, 0.0, 1.0);
  int r = int(30 + 220 * f), g = int(40 + 180 * f), b = int(120 - 90 * f);
  return fmt::format("rgb({},{},{})", r, g, b);
}

const int W = 520, H = 420, L = 70, T = 40, PW = 360, PH = 300;

std::string heatmap(const std::string& title, const Surface& s, const std::string& unit,
                    const std::vector<std::pair<Knobs, std::string>>& marks) {
  std::string o = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='12'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n<text x='{}' y='22' font-size='14'>{}</text>\n",
      W, H, L, xml_escape(title));
  double x0 = s.lo(0), x1 = std::max(s.hi(0), s.lo(0) + 1e-9), y0 = s.lo(1), y1 = std::max(s.hi(1), s.lo(1) + 1e-9);
  const int n = 24;
  double vmin = 1e300, vmax = -1e300;
  std::vector<double> v(n * n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      double x = x0 + (x1 - x0) * (i + 0.5) / n, y = y0 + (y1 - y0) * (j + 0.5) / n;
      v[size_t(j * n + i)] = std::exp(s(x, y));  // a StratumModel surface holds the value's log
      vmin = std::min(vmin, v[size_t(j * n + i)]), vmax = std::max(vmax, v[size_t(j * n + i)]);
    }
  double cw = double(PW) / n, ch = double(PH) / n;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      o += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}'/>\n", L + i * cw,
                       T + PH - (j + 1) * ch, cw + 0.5, ch + 0.5,
                       color(vmax > vmin ? (v[size_t(j * n + i)] - vmin) / (vmax - vmin) : 0.5));
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * PW; };
  auto py = [&](double y) { return T + PH - (y - y0) / (y1 - y0) * PH; };
  for (double x : s.levels(0))
    o += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{}</text>\n", px(x), T + PH + 16,
                     std::lround(std::exp2(x)));
  for (double y : s.levels(1))
    o += fmt::format("<text x='{}' y='{:.1f}' text-anchor='end'>{}</text>\n", L - 6, py(y) + 4, std::lround(std::exp2(y)));
  o += fmt::format("<text x='{}' y='{}' text-anchor='middle'>concurrency cc (log scale)</text>\n", L + PW / 2, T + PH + 34);
  o += fmt::format("<text x='16' y='{}' transform='rotate(-90 16 {})' text-anchor='middle'>parallelism p</text>\n",
                   T + PH / 2, T + PH / 2);
  for (const auto& [k, label] : marks) {
    double x = std::clamp(std::log2(double(k.cc)), x0, x1), y = std::clamp(std::log2(double(k.p)), y0, y1);
    o += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='6' fill='none' stroke='red' stroke-width='2'/>"
                     "<text x='{:.1f}' y='{:.1f}' fill='red'>{}</text>\n",
                     px(x), py(y), px(x) + 8, py(y) - 8, xml_escape(label));
  }
  // The scale.
  for (int k = 0; k <= 10; ++k)
    o += fmt::format("<rect x='{}' y='{:.1f}' width='16' height='{:.1f}' fill='{}'/>\n", L + PW + 20,
                     T + PH - (k + 1) * PH / 11.0, PH / 11.0 + 0.5, color(k / 10.0));
  o += fmt::format("<text x='{}' y='{}'>{:.3g} {}</text><text x='{}' y='{}'>{:.3g}</text>\n", L + PW + 40, T + 10, vmax,
                   xml_escape(unit), L + PW + 40, T + PH, vmin);
  return o + "</svg>\n";
}

std::string curves(const std::string& title, const StratumModel& m, const std::vector<std::pair<Knobs, std::string>>& marks) {
  std::string o = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='12'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n<text x='{}' y='22' font-size='14'>{}</text>\n",
      W, H, L, xml_escape(title));
  const Surface& t = m.t[0];
  const Surface& e = m.e[0];
  double x0 = t.lo(0), x1 = std::max(t.hi(0), x0 + 1);
  double f = t.levels(1).empty() ? 0 : t.levels(1).front();
  auto line = [&](const Surface& s, const char* stroke, const char* label, int row) {
    if (s.levels(0).empty() && s.kind() == Surface::Kind::Constant && &s == &e && !m.has_energy) return;
    double lo = 1e300, hi = -1e300;
    std::vector<double> v;
    for (int i = 0; i <= 40; ++i) {
      v.push_back(std::exp(s(x0 + (x1 - x0) * i / 40, f)));
      lo = std::min(lo, v.back()), hi = std::max(hi, v.back());
    }
    if (hi <= lo) hi = lo + 1;
    std::string pts;
    for (int i = 0; i <= 40; ++i)
      pts += fmt::format("{:.1f},{:.1f} ", L + PW * i / 40.0, T + PH - (v[size_t(i)] - lo) / (hi - lo) * PH * 0.9 - PH * 0.05);
    o += fmt::format("<polyline points='{}' fill='none' stroke='{}' stroke-width='2'/>\n", pts, stroke);
    o += fmt::format("<text x='{}' y='{}' fill='{}'>{} ({:.3g} .. {:.3g})</text>\n", L + PW + 6, T + 20 * row, stroke,
                     label, lo, hi);
  };
  line(t, "steelblue", "Mbit/s", 1);
  if (m.has_energy) line(e, "darkorange", "J/GB", 2);
  for (double x : t.levels(0))
    o += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{}</text>\n", L + (x - x0) / (x1 - x0) * PW, T + PH + 16,
                     std::lround(x));
  o += fmt::format("<text x='{}' y='{}' text-anchor='middle'>online cores{}</text>\n", L + PW / 2, T + PH + 34,
                   m.one_frequency ? " (one frequency: a curve)" : "");
  for (const auto& [k, label] : marks) {
    double x = L + (std::clamp(double(k.cores), x0, x1) - x0) / (x1 - x0) * PW;
    o += fmt::format("<line x1='{:.1f}' x2='{:.1f}' y1='{}' y2='{}' stroke='red' stroke-dasharray='4'/>"
                     "<text x='{:.1f}' y='{}' fill='red'>{}</text>\n",
                     x, x, T, T + PH, x + 4, T + 14, xml_escape(label));
  }
  return o + "</svg>\n";
}

}  // namespace

std::vector<std::string> write_plots(const std::vector<StratumModel>& models, const ParamTable& t, const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::vector<std::string> files;
  for (size_t i = 0; i < t.strata.size() && i < models.size(); ++i) {
    const TableStratum& s = t.strata[i];
    const StratumModel& m = models[i];
    if (!m.fitted) continue;  // too few rows for surfaces: nothing to draw
    std::vector<std::pair<Knobs, std::string>> marks;
    bool met = false;
    if (const TableEntry* e = choose_level(s, "throughput", 0.9, met)) marks.push_back({e->choice.knobs, "least J at >=90% T"});
    if (m.has_energy)
      if (const TableEntry* e = choose_level(s, "energy", 1.25, met)) marks.push_back({e->choice.knobs, "most T at <=1.25x E"});
    std::string base = s.id;
    std::replace(base.begin(), base.end(), '/', '-');
    auto write = [&](const std::string& name, const std::string& svg) {
      std::string path = dir + "/" + base + "-" + name + ".svg";
      std::ofstream(path) << svg;
      files.push_back(path);
    };
    write("throughput-cc-p", heatmap(s.id + ": throughput over (cc, p)", m.t[1], "Mbit/s", marks));
    if (m.has_energy) write("energy-cc-p", heatmap(s.id + ": energy over (cc, p)", m.e[1], "J/GB", marks));
    write("cores", curves(s.id + ": throughput and energy over cores", m, marks));
  }
  return files;
}

}  // namespace xfer::hla
