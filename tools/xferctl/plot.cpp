#include "plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "xfer/svg.h"
#include "xfer/text.h"

namespace xferctl {

namespace {

struct Point {
  double t0 = 0, t = 0, mbps = 0;
  double watts = -1;       // < 0: no energy figure
  double cap_mbps = 0;     // the arbiter's
  double ext_load = 0;     // 0..1 of the link
  std::string decision;    // the tuner changed the parameters at its end, and why
  std::string params;
};

std::string polyline(const std::vector<std::pair<double, double>>& pts, const char* color, const char* extra = "") {
  if (pts.empty()) return "";
  std::string o = "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"2\" " + extra + " points=\"";
  for (const auto& [x, y] : pts) o += fmt::format("{:.1f},{:.1f} ", x, y);
  return o + "\"/>\n";
}

}  // namespace

std::string job_plot_svg(const nlohmann::json& report, const std::string& title) {
  const nlohmann::json& tl = report.contains("timeline") ? report["timeline"] : nlohmann::json::array();
  std::vector<Point> pts;
  for (const auto& e : tl) {
    if (!e.is_object()) continue;
    Point p;
    p.t = e.value("t", 0.0);
    p.t0 = std::max(0.0, p.t - e.value("interval_s", 0.0));
    p.mbps = e.value("throughput_mbps", 0.0);
    double s = e.value("interval_s", 0.0);
    if (e.contains("joules") && s > 0) p.watts = e["joules"].get<double>() / s;
    p.cap_mbps = e.value("allotted_mbps", 0.0);
    p.ext_load = e.value("ext_load", 0.0);
    p.decision = e.value("decision", "");
    if (e.contains("params") && e["params"].is_array())
      for (const auto& c : e["params"])
        p.params += fmt::format("{}{} cc {} p {} pp {}", p.params.empty() ? "" : "; ", c.value("chunk", "?"), c.value("cc", 0),
                                c.value("p", 0), c.value("pp", 0));
    pts.push_back(p);
  }
  if (pts.empty()) throw std::runtime_error("the job has no control interval to draw yet");
  const nlohmann::json sla = report.value("sla", nlohmann::json::object());
  const double floor = sla.value("floor_mbps", 0.0), ceiling = sla.value("ceiling_j_per_gb", 0.0);

  xfer::SvgFrame f;
  f.W = 820, f.R = 230;
  double max_t = 0, max_mbps = floor, max_w = 0;
  for (const Point& p : pts) {
    max_t = std::max(max_t, p.t), max_mbps = std::max({max_mbps, p.mbps, p.cap_mbps}), max_w = std::max(max_w, p.watts);
    if (ceiling > 0) max_w = std::max(max_w, ceiling * p.mbps / 8e3);  // J/GB x GB/s
  }
  f.max_x = xfer::nice_max(max_t), f.max_y = xfer::nice_max(max_mbps * 1.05);
  const double wmax = xfer::nice_max(max_w * 1.05);
  auto WY = [&](double w) { return f.Y(w / wmax * f.max_y); };  // power on the right axis

  std::ostringstream o;
  o << f.open(title, "time since the job started, s", "throughput, Mbit/s");
  // Cross traffic behind everything.
  for (const Point& p : pts)
    if (p.ext_load > 0.02)
      o << fmt::format(R"s(<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="#f2a900" fill-opacity="{:.2f}"><title>cross traffic {:.0f}% of the link</title></rect>)s",
                       f.X(p.t0), f.T, std::max(1.0, f.X(p.t) - f.X(p.t0)), f.H - f.T - f.B,
                       std::min(0.5, 0.1 + 0.4 * p.ext_load), 100 * p.ext_load)
        << "\n";
  // The right axis: watts.
  for (int i = 0; i <= 5; ++i) {
    double w = wmax * i / 5;
    o << fmt::format(R"s(<text x="{}" y="{:.1f}" fill="{}">{:g}</text>)s", f.W - f.R + 6, WY(w) + 4, xfer::svg_color(1), w)
      << "\n";
  }
  o << fmt::format(R"s(<text x="{}" y="{}" fill="{}" transform="rotate(90 {} {})" text-anchor="middle">power, W</text>)s",
                   f.W - f.R + 44, (f.T + f.H - f.B) / 2, xfer::svg_color(1), f.W - f.R + 44, (f.T + f.H - f.B) / 2)
    << "\n";

  std::vector<std::pair<double, double>> thr, pw, cap, allow;
  for (const Point& p : pts) {
    thr.emplace_back(f.X(p.t), f.Y(p.mbps));
    if (p.watts >= 0) pw.emplace_back(f.X(p.t), WY(p.watts));
    if (p.cap_mbps > 0) cap.emplace_back(f.X(p.t), f.Y(p.cap_mbps));
    if (ceiling > 0) allow.emplace_back(f.X(p.t), WY(ceiling * p.mbps / 8e3));
  }
  o << polyline(thr, xfer::svg_color(0)) << polyline(pw, xfer::svg_color(1))
    << polyline(cap, "#777", "stroke-dasharray=\"2 3\"") << polyline(allow, xfer::svg_color(1), "stroke-dasharray=\"6 4\"");
  if (floor > 0)
    o << fmt::format(R"s(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="{}" stroke-width="2" stroke-dasharray="6 4"/>)s",
                     f.L, f.Y(floor), f.W - f.R, f.Y(floor), xfer::svg_color(2))
      << "\n";
  // Parameter changes: a mark at the top, the new parameters and why in its tooltip.
  int changes = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (pts[i].decision.empty()) continue;
    ++changes;
    std::string next = i + 1 < pts.size() ? pts[i + 1].params : std::string();
    double x = f.X(pts[i].t);
    o << fmt::format(R"s(<path d="M{:.1f},{} l-5,-9 h10 z" fill="#444"><title>{}{}</title></path>)s", x, f.T, xfer::xml_escape(xfer::printable(pts[i].decision)),
                     next.empty() ? "" : " -> " + xfer::xml_escape(next))
      << "\n"
      << fmt::format(R"s(<line x1="{:.1f}" y1="{}" x2="{:.1f}" y2="{}" stroke="#444" stroke-opacity="0.25"/>)s", x, f.T, x,
                     f.H - f.B)
      << "\n";
  }
  // The legend.
  std::vector<std::pair<std::string, std::string>> legend = {{xfer::svg_color(0), "throughput"},
                                                             {xfer::svg_color(1), "power"}};
  if (floor > 0) legend.emplace_back(xfer::svg_color(2), fmt::format("floor {:g} Mbit/s (dashed)", floor));
  if (ceiling > 0) legend.emplace_back(xfer::svg_color(1), fmt::format("power the ceiling {:g} J/GB allows", ceiling));
  if (!cap.empty()) legend.emplace_back("#777", "arbiter's cap (dotted)");
  legend.emplace_back("#444", fmt::format("{} parameter change(s) (marks)", changes));
  legend.emplace_back("#f2a900", "cross traffic (shaded)");
  if (sla.contains("promise") && !sla.value("promise", "").empty())
    legend.emplace_back("#000", fmt::format("SLA {}: {} met, {} missed", sla.value("promise", ""), sla.value("intervals_met", 0),
                                            sla.value("intervals_missed", 0)));
  for (size_t i = 0; i < legend.size(); ++i)
    o << fmt::format(R"s(<text x="{}" y="{}" fill="{}">{}</text>)s", f.legend_x() + 40, f.legend_y(int(i)),
                     legend[i].first, xfer::xml_escape(legend[i].second))
      << "\n";
  o << "</svg>\n";
  return o.str();
}

}  // namespace xferctl
