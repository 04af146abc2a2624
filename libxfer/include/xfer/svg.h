// Plots as SVG, written by hand (a few lines and texts): the frame every
// plot shares, its colours, and round axis ends.
#pragma once

#include <string>
#include <vector>

namespace xfer {

// The frame the plots share (the bench's, xferctl status --plot): a W x H
// canvas with margins, axes from 0 to max_x / max_y, five grid steps each,
// a title and axis labels.
struct SvgFrame {
  double W = 640, H = 420, L = 70, R = 180, T = 40, B = 50;
  double max_x = 1, max_y = 1;
  double X(double v) const { return L + (W - L - R) * v / max_x; }
  double Y(double v) const { return H - B - (H - T - B) * v / max_y; }
  // The opening <svg>, background, title, grid, tick labels and axis labels.
  std::string open(const std::string& title, const std::string& x_label, const std::string& y_label) const;
  // A legend entry's position (the i-th line right of the plot).
  double legend_x() const { return W - R + 12; }
  double legend_y(int i) const { return T + 16 + 18 * i; }
  // Widens the right margin (and the canvas with it, the plot keeps its
  // size) and heightens the canvas so that these legend lines, `indent`
  // pixels right of legend_x(), fit inside the picture; before open().
  void fit_legend(const std::vector<std::string>& labels, double indent = 0);
  // A generous width of a line of the 12-px sans-serif text, in pixels.
  static double text_width(const std::string& utf8);
};
// The plots' colours, in turn.
const char* svg_color(int i);
// The round number at or above v that an axis ends at (1, 2, 2.5, 5 x 10^k); 1 for v <= 0.
double nice_max(double v);

}  // namespace xfer
