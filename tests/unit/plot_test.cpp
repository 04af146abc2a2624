// A job's timeline as SVG (tools/xferctl/plot.h), from a report like the daemon's.
#include "plot.h"
#include "xfer/svg.h"

#include <gtest/gtest.h>

using namespace xferctl;

namespace {
nlohmann::json report(bool floor) {
  nlohmann::json r;
  r["timeline"] = nlohmann::json::array();
  for (int i = 1; i <= 6; ++i) {
    nlohmann::json e = {{"t", i * 5.0}, {"interval_s", 5.0}, {"throughput_mbps", 40.0 + i}, {"joules", 100.0 + i},
                        {"params", {{{"chunk", "large"}, {"cc", i}, {"p", 1}, {"pp", 1}}}}};
    if (i == 3) e["decision"] = "cc up: <more> & \"faster\"";
    if (i >= 4) e["ext_load"] = 0.4;
    if (i == 5) e["allotted_mbps"] = 45.0;
    r["timeline"].push_back(e);
  }
  if (floor) r["sla"] = {{"promise", "floor 30 Mbit/s"}, {"floor_mbps", 30.0}, {"intervals_met", 5}, {"intervals_missed", 1}};
  else r["sla"] = {{"promise", "ceiling 50 J/GB"}, {"ceiling_j_per_gb", 50.0}, {"intervals_met", 6}, {"intervals_missed", 0}};
  return r;
}
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

TEST(Plot, AFloorJobsTimelineHasItsSeriesMarksAndShading) {
  std::string svg = job_plot_svg(report(true), "job 3 <&>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("job 3 &lt;&amp;&gt;"), std::string::npos) << "the title is escaped";
  EXPECT_EQ(count(svg, "<polyline"), 3u) << "throughput, power, the arbiter's cap";
  EXPECT_NE(svg.find("floor 30 Mbit/s (dashed)"), std::string::npos);
  EXPECT_NE(svg.find("SLA floor 30 Mbit/s: 5 met, 1 missed"), std::string::npos);
  EXPECT_EQ(count(svg, "<title>cross traffic 40% of the link</title>"), 3u);
  EXPECT_EQ(count(svg, "<path d="), 1u) << "one parameter change";
  EXPECT_NE(svg.find("cc up: &lt;more&gt; &amp; \"faster\" -> large cc 4 p 1 pp 1"), std::string::npos) << svg;
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(Plot, ACeilingIsDrawnAsThePowerItAllowsAndAnEmptyTimelineIsRefused) {
  std::string svg = job_plot_svg(report(false), "job 4");
  EXPECT_NE(svg.find("power the ceiling 50 J/GB allows"), std::string::npos);
  EXPECT_EQ(count(svg, "stroke-dasharray=\"6 4\""), 1u) << "the allowed-power curve";
  EXPECT_THROW(job_plot_svg(nlohmann::json::object(), "none"), std::runtime_error);
}

// The bench's throughput-energy plots cut their longest legend lines at the
// right edge (issue 54): a frame fitted to its legend holds every line, at
// a generous 7.2 px a character, and keeps its plot area.
TEST(Plot, AFrameFittedToItsLegendHoldsItsLongestLine) {
  xfer::SvgFrame f;
  const double plot_w = f.W - f.L - f.R;
  std::vector<std::string> labels = {"■ min-energy", "■ energy-efficient step 4 (d47ecf8, before)",
                                     "● aria2c -j16 -x4 --min-split-size=1M"};
  ASSERT_GT(f.legend_x() + xfer::SvgFrame::text_width(labels[1]), f.W) << "the default frame cuts it";
  f.fit_legend(labels);
  for (const std::string& l : labels) EXPECT_LE(f.legend_x() + xfer::SvgFrame::text_width(l), f.W) << l;
  EXPECT_DOUBLE_EQ(f.W - f.L - f.R, plot_w);
  EXPECT_EQ(xfer::SvgFrame::text_width("● ab"), 4 * 7.2) << "characters, not bytes";
  // Thirty lines: the canvas grows to hold the last.
  f.fit_legend(std::vector<std::string>(30, "x"));
  EXPECT_LE(f.legend_y(29), f.H);
  // A short legend changes nothing.
  xfer::SvgFrame g;
  const double w = g.W, h = g.H;
  g.fit_legend({"curl"});
  EXPECT_EQ(g.W, w);
  EXPECT_EQ(g.H, h);
}
