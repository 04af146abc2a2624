// EnergyMeter arithmetic: the models against hand-computed values, RAPL
// counter wrap, utilisation from a fake /proc, calibration recovering known
// coefficients.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "xfer/energy.h"

namespace fs = std::filesystem;

TEST(EnergyModel, FineGrainedByHand) {
  xfer::PowerCoefficients c;  // paper defaults: C_cpu,2 = 0.224
  EXPECT_NEAR(c.c_cpu(2), 0.224, 1e-12);
  EXPECT_FALSE(c.fine_grained());
  EXPECT_NEAR(c.dynamic_watts(2, 50, 0, 0, 0), 11.2, 1e-9);
  c.memory = 0.05, c.disk = 0.1, c.nic = 0.02, c.tdp_ratio = 2;
  // 0.224 * 40 * 2 + 0.05 * 30 + 0.1 * 10 + 0.02 * 50 = 17.92 + 1.5 + 1 + 1 = 21.42
  EXPECT_NEAR(c.dynamic_watts(2, 40, 30, 10, 50), 21.42, 1e-9);
  EXPECT_TRUE(c.fine_grained());
  // One core: 0.011 - 0.082 + 0.344 = 0.273; four: 0.176 - 0.328 + 0.344 = 0.192.
  EXPECT_NEAR(c.c_cpu(1), 0.273, 1e-12);
  EXPECT_NEAR(c.c_cpu(4), 0.192, 1e-12);
}

TEST(EnergyRapl, CounterWrapAtMaxEnergyRange) {
  EXPECT_EQ(xfer::RaplMeter::delta_uj(1000, 5000, 262143328850ull), 4000u);
  EXPECT_EQ(xfer::RaplMeter::delta_uj(262143328850ull - 100, 50, 262143328850ull), 150u);
}

TEST(EnergyModel, CoefficientFileRoundTripAndErrors) {
  auto dir = fs::temp_directory_path() / ("coef-" + std::to_string(getpid()));
  fs::create_directories(dir);
  xfer::PowerCoefficients c;
  c.memory = 0.25, c.idle_watts = 31.5, c.origin = "test";
  c.save((dir / "m.toml").string());
  auto d = xfer::PowerCoefficients::load((dir / "m.toml").string());
  EXPECT_DOUBLE_EQ(d.memory, 0.25);
  EXPECT_DOUBLE_EQ(d.idle_watts, 31.5);
  EXPECT_DOUBLE_EQ(d.cpu_b, -0.082);
  EXPECT_EQ(d.origin, "test");
  std::ofstream(dir / "bad.toml") << "cpu_a = 1\nwatts = 3\n";
  try {
    xfer::PowerCoefficients::load((dir / "bad.toml").string());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.toml:2: unknown key 'watts'"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "broken.toml") << "cpu_a = = 1\n";
  EXPECT_THROW(xfer::PowerCoefficients::load((dir / "broken.toml").string()), std::runtime_error);
  fs::remove_all(dir);
}

TEST(EnergyModel, UtilisationFromProcCounters) {
  auto root = fs::temp_directory_path() / ("proc-" + std::to_string(getpid()));
  fs::create_directories(root / "proc");
  fs::create_directories(root / "sys/devices/system/cpu");
  fs::create_directories(root / "sys/class/net/eth0/statistics");
  std::ofstream(root / "sys/devices/system/cpu/online") << "0-1\n";
  auto write = [&](uint64_t user, uint64_t idle, uint64_t rx) {
    std::ofstream(root / "proc/stat") << "cpu  " << user << " 0 0 " << idle << " 0 0 0 0 0 0\ncpu0 1 0 0 1\n";
    std::ofstream(root / "proc/meminfo") << "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 750 kB\n";
    std::ofstream(root / "proc/diskstats") << "";
    std::ofstream(root / "sys/class/net/eth0/statistics/rx_bytes") << rx << "\n";
    std::ofstream(root / "sys/class/net/eth0/statistics/tx_bytes") << 0 << "\n";
  };
  write(100, 900, 0);
  xfer::UtilisationProbe probe((root / "proc").string(), (root / "sys").string(), 1000);
  write(130, 970, 0);  // 30 busy of 100 jiffies
  auto u = probe.sample();
  EXPECT_NEAR(u.cpu, 30.0, 1e-9);
  EXPECT_NEAR(u.memory, 25.0, 1e-9);
  EXPECT_EQ(u.cores, 2);
  fs::remove_all(root);
}

// Synthetic samples from known coefficients, with noise: the fit recovers them.
TEST(EnergyCalibration, FitRecoversKnownCoefficients) {
  xfer::PowerCoefficients truth;
  truth.cpu_a = 0.02, truth.cpu_b = -0.05, truth.cpu_c = 0.3, truth.memory = 0.08, truth.disk = 0.15;
  truth.idle_watts = 40;
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(0, 0.05);
  std::uniform_real_distribution<double> u(0, 100);
  std::vector<xfer::CalibrationSample> s;
  for (int n = 1; n <= 4; ++n)
    for (int i = 0; i < 30; ++i) {
      xfer::CalibrationSample x{n, u(rng), u(rng), u(rng), 0, 0};
      x.watts = truth.dynamic_watts(n, x.u_cpu, x.u_mem, x.u_disk, 0) + truth.idle_watts + noise(rng);
      s.push_back(x);
    }
  auto c = xfer::fit_power_model(s);
  EXPECT_NEAR(c.cpu_a, 0.02, 2e-3);
  EXPECT_NEAR(c.cpu_b, -0.05, 1e-2);
  EXPECT_NEAR(c.cpu_c, 0.3, 1e-2);
  EXPECT_NEAR(c.memory, 0.08, 2e-3);
  EXPECT_NEAR(c.disk, 0.15, 2e-3);
  EXPECT_NEAR(c.nic, 0, 1e-12);  // no NIC load in the samples: not fitted
  EXPECT_NEAR(c.idle_watts, 40, 0.2);
  EXPECT_THROW(xfer::fit_power_model({s[0], s[1]}), std::invalid_argument);
}

// energy-aware eq. 2-3 by hand: n = 2 -> C = 0.044 - 0.164 + 0.344 = 0.224 W/%.
TEST(PowerModel, CpuModelByHand) {
  xfer::PowerCoefficients m;
  EXPECT_NEAR(m.c_cpu(2), 0.224, 1e-12);
  EXPECT_NEAR(m.c_cpu(4), 0.176 - 0.328 + 0.344, 1e-12);
  EXPECT_NEAR(m.dynamic_watts(2, 50, 0, 0, 0), 11.2, 1e-9);
  // 3 CPU seconds over 10 s on 2 cores: u = 15% -> 3.36 W -> 33.6 J.
  EXPECT_NEAR(m.cpu_energy_j(3, 10, 2), 33.6, 1e-9);
  m.tdp_ratio = 0.5;
  EXPECT_NEAR(m.cpu_energy_j(3, 10, 2), 16.8, 1e-9);
}

// End-system energy (energy-aware eq. 4): the idle draw of the online cores
// on top of the dynamic part. The default per core is the model's peak
// dynamic power over the cores present (idle = half of peak); a file can set
// it, and a calibration measures the idle draw whole.
TEST(PowerModel, IdleDrawIsPerOnlineCore) {
  xfer::PowerCoefficients m;
  int n = std::max(1, int(sysconf(_SC_NPROCESSORS_CONF)));
  EXPECT_NEAR(m.idle_per_core_w(), m.c_cpu(n) * 100 / n, 1e-9);
  EXPECT_NE(m.idle_basis().find("assumed"), std::string::npos) << m.idle_basis();
  m.idle_core_watts = 3, m.idle_watts = 5;
  EXPECT_NEAR(m.idle_power_w(2), 11, 1e-12);
  EXPECT_NEAR(m.idle_power_w(1), 8, 1e-12);  // a core offline draws nothing
  EXPECT_EQ(m.idle_basis().find("assumed"), std::string::npos) << m.idle_basis();
  std::string dir = ::testing::TempDir() + "/idle-model";
  std::filesystem::create_directories(dir);
  m.save(dir + "/m.toml");
  xfer::PowerCoefficients back = xfer::PowerCoefficients::load(dir + "/m.toml");
  EXPECT_DOUBLE_EQ(back.idle_core_watts, 3);
  EXPECT_DOUBLE_EQ(back.idle_watts, 5);
  std::filesystem::remove_all(dir);
}
