// Every library of the design links and works on this machine: the build
// proves they are found, this proves they run and agree with the system.
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <cpufreq.h>
#include <gtest/gtest.h>
#include <libalglib/interpolation.h>
#include <powercap/powercap-rapl.h>
#include <sqlite3.h>
#include <systemd/sd-id128.h>

#include <Eigen/Dense>
#include <filesystem>
#include <fstream>
#include <toml++/toml.h>

#include "xfer/part_file.h"

TEST(Dependencies, EigenSolvesALinearSystem) {
  Eigen::Matrix2d a;
  a << 2, 1, 1, 3;
  Eigen::Vector2d x = a.colPivHouseholderQr().solve(Eigen::Vector2d(3, 5));
  EXPECT_NEAR(x(0), 0.8, 1e-12);
  EXPECT_NEAR(x(1), 1.4, 1e-12);
}

TEST(Dependencies, AlglibNaturalCubicSplinePassesThroughItsKnots) {
  alglib::real_1d_array x = "[0,1,2,3,4]", y = "[0,1,4,9,16]";
  alglib::spline1dinterpolant s;
  alglib::spline1dbuildcubic(x, y, s);  // natural boundary conditions by default
  EXPECT_NEAR(alglib::spline1dcalc(s, 2.0), 4.0, 1e-12);
  EXPECT_NEAR(alglib::spline1dcalc(s, 3.0), 9.0, 1e-12);
}

TEST(Dependencies, LibcpupowerAgreesWithSysfs) {
  bool sysfs = std::filesystem::exists("/sys/devices/system/cpu/cpu0/cpufreq/scaling_driver");
  char* driver = cpufreq_get_driver(0);
  EXPECT_EQ(driver != nullptr, sysfs);
  if (driver) cpufreq_put_driver(driver);
}

TEST(Dependencies, LibpowercapAgreesWithSysfs) {
  bool sysfs = std::filesystem::exists("/sys/class/powercap/intel-rapl");
  EXPECT_EQ(powercap_rapl_control_is_supported() == 1, sysfs);
}

TEST(Dependencies, LibbpfSeesBtfAndSockOps) {
  btf* vmlinux = btf__load_vmlinux_btf();
  ASSERT_NE(vmlinux, nullptr) << "no BTF at /sys/kernel/btf/vmlinux";
  EXPECT_GT(btf__find_by_name_kind(vmlinux, "tcp_sock", BTF_KIND_STRUCT), 0);
  btf__free(vmlinux);
  EXPECT_EQ(libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_SOCK_OPS, nullptr), 1);
  // (TRACING programs need an attach target: libbpf cannot probe them bare;
  // the flow monitor loads its iterator and tracepoint for real instead.)
}

TEST(Dependencies, LibsystemdBootIdMatchesProc) {
  sd_id128_t id;
  ASSERT_EQ(sd_id128_get_boot(&id), 0);
  char s[SD_ID128_UUID_STRING_MAX];
  EXPECT_EQ(std::string(sd_id128_to_uuid_string(id, s)), xfer::boot_id());
}

TEST(Dependencies, SqliteAndToml) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT 40 + 2", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 42);
  sqlite3_finalize(st);
  sqlite3_close(db);
  auto t = toml::parse("[policy.fast]\nmax_channels = 64\n");
  EXPECT_EQ(t["policy"]["fast"]["max_channels"].value_or(0), 64);
}
