#include "xfer/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "xfer/text.h"

namespace xfer {

const char* svg_color(int i) {
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                 "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
  return colors[i % 10];
}

std::string SvgFrame::open(const std::string& title, const std::string& x_label, const std::string& y_label) const {
  std::ostringstream o;
  o << fmt::format(R"s(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">)s", W, H)
    << "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << fmt::format(R"s(<text x="{}" y="22" font-size="15" font-weight="bold">{}</text>)s", L, xml_escape(title)) << "\n";
  for (int i = 0; i <= 5; ++i) {
    double xv = max_x * i / 5, yv = max_y * i / 5;
    o << fmt::format(R"s(<line x1="{:.1f}" y1="{}" x2="{:.1f}" y2="{}" stroke="#ddd"/>)s", X(xv), T, X(xv), H - B) << "\n"
      << fmt::format(R"s(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="#ddd"/>)s", L, Y(yv), W - R, Y(yv)) << "\n"
      << fmt::format(R"s(<text x="{:.1f}" y="{}" text-anchor="middle">{:g}</text>)s", X(xv), H - B + 16, xv) << "\n"
      << fmt::format(R"s(<text x="{}" y="{:.1f}" text-anchor="end">{:g}</text>)s", L - 6, Y(yv) + 4, yv) << "\n";
  }
  o << fmt::format(R"s(<text x="{}" y="{}" text-anchor="middle">{}</text>)s", (L + W - R) / 2, H - 12, x_label) << "\n"
    << fmt::format(R"s(<text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">{}</text>)s",
                   (T + H - B) / 2, (T + H - B) / 2, y_label)
    << "\n";
  return o.str();
}

double SvgFrame::text_width(const std::string& utf8) {
  // 7.2 px a character at font-size 12 is above sans-serif's average (~6.5),
  // so a line of capitals and digits still fits.
  size_t chars = 0;
  for (unsigned char c : utf8) chars += (c & 0xC0) != 0x80;  // code points, not bytes
  return 7.2 * double(chars);
}

void SvgFrame::fit_legend(const std::vector<std::string>& labels, double indent) {
  double widest = 0;
  for (const std::string& l : labels) widest = std::max(widest, text_width(l));
  const double need = 12 + indent + widest + 10;
  if (need > R) W += need - R, R = need;
  if (!labels.empty()) {
    const double bottom = legend_y(int(labels.size()) - 1) + 8;
    if (bottom > H) H = bottom;
  }
}

double nice_max(double v) {
  if (v <= 0) return 1.0;
  double p = std::pow(10, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

}  // namespace xfer
