// The CPU-based power model of energy-aware-transfer-algorithms.txt §2.2:
//
//   C_cpu,n = 0.011 n^2 - 0.082 n + 0.344            (eq. 2; n = active cores)
//   P_t     = C_cpu,n * u_cpu,t * TDP_SR / TDP_SL    (eq. 3; u in percent)
//
// The coefficients are the paper's, fitted on its servers; on this machine
// they are an estimate, and every figure computed with them is labelled
// "model". (RAPL and calibration to this machine come with the EnergyMeter.)
// u_cpu is the utilisation of the whole machine in percent: CPU seconds over
// wall seconds times n, times 100. With no constant term the model gives the
// dynamic power of the work measured, not the machine's idle draw.
#pragma once

namespace xfer {

struct CpuPowerModel {
  double tdp_ratio = 1.0;  // TDP of this machine / TDP of the machine the coefficients came from

  static double coefficient(int active_cores);  // C_cpu,n, watts per percent utilisation
  double power_w(double util_pct, int active_cores) const;
  // Energy of cpu_s CPU seconds spent over wall_s on n cores (joules).
  double energy_j(double cpu_s, double wall_s, int active_cores) const;

  static constexpr const char* kSource = "model:cpu (energy-aware eq. 2-3)";
};

}  // namespace xfer
