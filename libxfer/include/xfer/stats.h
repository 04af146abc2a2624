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

}  // namespace xfer
