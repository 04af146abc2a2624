// A job's timeline as a picture (xferctl status N --plot FILE.svg), from
// its report (Job1.Report): throughput (left axis) and power (right axis)
// per control interval; its floor as a line, or its energy ceiling as the
// power it allows at the rate moved (ceiling J/GB x GB/s: under that curve
// the ceiling holds); the arbiter's cap; a mark at each interval whose end
// changed the parameters (the reason in its tooltip); cross traffic shaded
// behind, darker for more.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace xferctl {

// The SVG; throws std::runtime_error when the report has no interval to draw.
std::string job_plot_svg(const nlohmann::json& report, const std::string& title);

}  // namespace xferctl
