// Least-squares fit of the power model to measured samples (Eigen):
//   P = a (n^2 u) + b (n u) + c u + m u_mem + d u_disk + k u_nic + idle
#include <Eigen/Dense>
#include <set>
#include <stdexcept>

#include "xfer/energy.h"

namespace xfer {

PowerCoefficients fit_power_model(const std::vector<CalibrationSample>& s) {
  std::set<int> cores;
  bool mem = false, disk = false, nic = false;
  for (const auto& x : s) {
    cores.insert(x.cores);
    mem = mem || x.u_mem > 0, disk = disk || x.u_disk > 0, nic = nic || x.u_nic > 0;
  }
  // Columns actually identifiable from these samples.
  bool quad = cores.size() >= 3, lin = cores.size() >= 2;
  std::vector<int> cols;  // 0 a, 1 b, 2 c, 3 mem, 4 disk, 5 nic, 6 idle
  if (quad) cols.push_back(0);
  if (lin) cols.push_back(1);
  cols.push_back(2);
  if (mem) cols.push_back(3);
  if (disk) cols.push_back(4);
  if (nic) cols.push_back(5);
  cols.push_back(6);
  if (s.size() < cols.size())
    throw std::invalid_argument("calibration: " + std::to_string(s.size()) + " samples cannot fit " +
                                std::to_string(cols.size()) + " coefficients");
  Eigen::MatrixXd A(s.size(), cols.size());
  Eigen::VectorXd y(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto& x = s[i];
    double n = x.cores;
    double all[7] = {n * n * x.u_cpu, n * x.u_cpu, x.u_cpu, x.u_mem, x.u_disk, x.u_nic, 1.0};
    for (size_t j = 0; j < cols.size(); ++j) A(Eigen::Index(i), Eigen::Index(j)) = all[cols[j]];
    y(Eigen::Index(i)) = x.watts;
  }
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(A);
  if (qr.rank() < Eigen::Index(cols.size()))
    throw std::invalid_argument("calibration: the samples do not vary enough to separate the coefficients (rank " +
                                std::to_string(qr.rank()) + " of " + std::to_string(cols.size()) + ")");
  Eigen::VectorXd x = qr.solve(y);
  PowerCoefficients c;
  c.cpu_a = c.cpu_b = c.cpu_c = c.memory = c.disk = c.nic = c.idle_watts = 0;
  double* fields[7] = {&c.cpu_a, &c.cpu_b, &c.cpu_c, &c.memory, &c.disk, &c.nic, &c.idle_watts};
  for (size_t j = 0; j < cols.size(); ++j) *fields[cols[j]] = x(Eigen::Index(j));
  c.tdp_ratio = 1.0;
  c.idle_core_watts = 0;  // the idle draw is measured whole, in idle_watts
  c.origin = "calibrated here against RAPL (" + std::to_string(s.size()) + " samples)";
  return c;
}

}  // namespace xfer
