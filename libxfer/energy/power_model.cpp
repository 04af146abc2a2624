#include "xfer/power_model.h"

#include <algorithm>

namespace xfer {

double CpuPowerModel::coefficient(int n) {
  double c = 0.011 * n * n - 0.082 * n + 0.344;
  return std::max(c, 0.0);
}

double CpuPowerModel::power_w(double util_pct, int n) const { return coefficient(n) * util_pct * tdp_ratio; }

double CpuPowerModel::energy_j(double cpu_s, double wall_s, int n) const {
  if (wall_s <= 0 || n <= 0) return 0;
  double util_pct = 100.0 * cpu_s / (wall_s * n);
  return power_w(util_pct, n) * wall_s;
}

}  // namespace xfer
