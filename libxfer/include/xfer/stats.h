// Small statistics shared by the analysis, the tuners and the bench.
#pragma once

#include <algorithm>
#include <vector>

namespace xfer {

// The median; the mean of the two middle values for an even count; 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + long(m), v.end());
  double hi = v[m];
  if (v.size() % 2) return hi;
  return (*std::max_element(v.begin(), v.begin() + long(m)) + hi) / 2;
}

// Jain's fairness index of shares x: (sum x)^2 / (n sum x^2), 1 when all are
// equal, 1/n when one has everything; 0 for none.
inline double jain_index(const std::vector<double>& x) {
  double s = 0, s2 = 0;
  for (double v : x) s += v, s2 += v * v;
  return s2 > 0 ? s * s / (double(x.size()) * s2) : 0;
}

}  // namespace xfer
