// The kernel layer for real: CPU hotplug on this machine (always brought
// back), and libcpupower / libpowercap against fake sysfs trees mounted over
// the real paths in a private mount namespace, so the real library code runs.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <set>

#include "report.h"

#include "daemon.h"
#include "fixture.h"
#include "xfer/energy.h"
#include "xfer/kernel.h"

namespace fs = std::filesystem;
using namespace xtest;

namespace {

const char* kCpu1 = "/sys/devices/system/cpu/cpu1/online";

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

// What cpu1/online read, every 20 ms, from its start until stop().
class Cpu1Watch {
 public:
  Cpu1Watch()
      : thread_([this] {
          while (!done_) {
            seen_.insert(slurp(kCpu1));
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        }) {}
  ~Cpu1Watch() { stop(); }
  const std::set<std::string>& stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
    return seen_;
  }

 private:
  std::atomic<bool> done_{false};
  std::set<std::string> seen_;
  std::thread thread_;
};

void put(const fs::path& p, const std::string& v) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << v << "\n";  // truncates in place: open fds see the new value
}

// A private mount namespace with `fake` mounted over `target`.
void mount_over(const std::string& fake, const std::string& target) {
  static bool unshared = false;
  if (!unshared) {
    ASSERT_EQ(unshare(CLONE_NEWNS), 0);
    ASSERT_EQ(mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
    unshared = true;
  }
  ASSERT_EQ(mount(fake.c_str(), target.c_str(), nullptr, MS_BIND, nullptr), 0) << strerror(errno);
}

}  // namespace

// Every hotplug test leaves cpu1 online, whatever happens inside it.
class HotplugTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kCpu1)) GTEST_SKIP() << "this machine has no hot-pluggable cpu1";
    state = make_temp_dir("kstate") + "/state.json";
  }
  void TearDown() override {
    std::ofstream(kCpu1) << "1";
    EXPECT_EQ(slurp(kCpu1), "1") << "cpu1 could not be brought back";
  }
  // `xferctl kernel --cores 1 --hold` in a child; returns once cpu1 is offline.
  pid_t hold_one_core() {
    pid_t pid = fork();
    if (pid == 0) {
      execl(bin("xferctl").c_str(), "xferctl", "kernel", "--cores", "1", "--hold", "--state-file", state.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 100 && slurp(kCpu1) != "0"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(slurp(kCpu1), "0");
    return pid;
  }
  // `xferctl run --sla static --cc 2 --cores 1 --kernel hotplug` and `extra`
  // on 30 small and 2 medium files from nginx, cpu1 watched throughout; the
  // files checked, cpu1 and the journal checked after.
  struct OneCoreJob {
    nlohmann::json result;
    std::string out, err;
    std::set<std::string> cpu1_seen;
  };
  OneCoreJob run_one_core_job(const std::string& extra) {
    xtest::Dataset d = xtest::dataset(30, 2, 0);
    xtest::Nginx nginx(d.dir);
    std::string work = make_temp_dir("kjob");
    std::ofstream(work + "/m") << d.manifest(nginx.url(false, "/"));
    OneCoreJob r;
    Cpu1Watch watch;
    r.out = capture(bin("xferctl") + " run --manifest " + work + "/m --dest " + work +
                    " --sla static --cc 2 --cores 1 --kernel hotplug --kernel-state " + state + " " + extra +
                    " --interval-ms 200 --json --no-progress 2> " + work + "/err");
    r.cpu1_seen = watch.stop();
    r.err = capture("cat " + work + "/err");
    r.result = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(r.result.is_discarded()) << r.out << r.err;
    if (r.result.is_discarded()) r.result = nlohmann::json::object();
    EXPECT_EQ(r.result.value("state", ""), "done") << r.err;
    EXPECT_EQ(slurp(kCpu1), "1");  // restored at exit
    EXPECT_FALSE(fs::exists(state));
    xtest::expect_identical(d, work);
    fs::remove_all(work);
    return r;
  }
  std::string state;
};

TEST_F(HotplugTest, CoreControlTakesCpu1OfflineAndBringsItBack) {
  {
    xfer::KernelJournal j(state);
    xfer::CoreControl cc({}, j);
    ASSERT_EQ(cc.online(), 2);
    cc.set_online(1);
    EXPECT_EQ(slurp(kCpu1), "0");
    EXPECT_EQ(cc.online(), 1);
    EXPECT_EQ(slurp("/sys/devices/system/cpu/online"), "0");
    EXPECT_THROW(cc.set_online(0), std::invalid_argument);  // never cpu0
    cc.set_online(2);
    EXPECT_EQ(slurp(kCpu1), "1");
    cc.set_online(1);
  }  // exit: the journal restores
  EXPECT_EQ(slurp(kCpu1), "1");
  EXPECT_FALSE(fs::exists(state));
}

// kill -9 leaves cpu1 offline; the next start restores it.
TEST_F(HotplugTest, CrashRestoreAfterKillNine) {
  pid_t pid = hold_one_core();
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_EQ(slurp(kCpu1), "0");  // nobody restored it
  EXPECT_TRUE(fs::exists(state));
  EXPECT_EQ(sh(bin("xferctl") + " kernel --restore --state-file " + state + " > /dev/null"), 0);
  EXPECT_EQ(slurp(kCpu1), "1");
  EXPECT_FALSE(fs::exists(state));
}

// A journal whose owner is alive is not a leftover: --restore and a second
// owner refuse, and cpu1 stays as the owner set it until the owner lets go.
TEST_F(HotplugTest, ALiveOwnerIsNotALeftover) {
  pid_t pid = hold_one_core();
  std::string err = make_temp_dir("kbusy") + "/err";
  EXPECT_EQ(sh(bin("xferctl") + " kernel --restore --state-file " + state + " > /dev/null 2> " + err), 3);
  EXPECT_NE(capture("cat " + err).find("in use by process " + std::to_string(pid)), std::string::npos)
      << capture("cat " + err);
  EXPECT_THROW(xfer::KernelJournal j(state), xfer::KernelBusy);
  EXPECT_EQ(slurp(kCpu1), "0");
  EXPECT_TRUE(fs::exists(state));
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  EXPECT_EQ(slurp(kCpu1), "1");
}

// The kernel layer inside a job: xferctl run --sla static --cores 1 with
// hotplug takes cpu1 offline for the transfer, reports it in the timeline,
// and brings it back when the job ends.
TEST_F(HotplugTest, JobTurnsCoresThroughTheKernelLayerAndRestores) {
  OneCoreJob r = run_one_core_job("--busy-cores taken --offline-after 0");
  const nlohmann::json& j = r.result;
  EXPECT_EQ(r.cpu1_seen.count("0"), 1u) << "cpu1 went offline for the job";
  EXPECT_EQ(j["kernel"]["mode"], "hotplug");
  EXPECT_EQ(j["kernel"]["cores"], 1);
  ASSERT_FALSE(j["timeline"].empty());
  EXPECT_EQ(j["timeline"].back()["cores"], 1);
}

// Issue 54: a job shorter than kernel.offline_after_s takes no core offline
// (the hotplug would cost it more than it saves); it runs on the one core
// it asked for by affinity, its timeline says 1 core, and the log says why.
TEST_F(HotplugTest, AJobShorterThanTheWaitTakesNoCoreOffline) {
  OneCoreJob r = run_one_core_job("--busy-cores taken --offline-after 60 --log-level info");
  const nlohmann::json& j = r.result;
  EXPECT_EQ(r.cpu1_seen, std::set<std::string>{"1"}) << "cpu1 went offline for a job shorter than the wait";
  EXPECT_EQ(j["kernel"]["cores"], 1);
  ASSERT_FALSE(j["timeline"].empty());
  EXPECT_EQ(j["timeline"].back()["cores"], 1);
  EXPECT_NE(r.err.find("for now; the rest go offline once the ask has stood 60.0 s"), std::string::npos) << r.err;
}

// Issue 54: a core other work keeps busy is never taken offline. Two
// spinning processes (as `yes` x2 in the issue) and a job that asks for one
// core with hotplug: cpu1 stays online the whole job (the timeline's cores
// say 2; the log, at info, says why).
// On d47ecf8 cpu1 went offline at the job's start.
TEST_F(HotplugTest, ACoreOtherWorkUsesStaysOnline) {
  std::vector<pid_t> spinners;
  for (int i = 0; i < 2; ++i) {
    pid_t p = fork();
    if (p == 0) {
      alarm(120);  // never outlives the test
      for (;;) asm volatile("");  // a side effect the compiler keeps: the loop spins
    }
    spinners.push_back(p);
  }
  OneCoreJob r = run_one_core_job("");
  for (pid_t p : spinners) kill(p, SIGKILL);
  for (pid_t p : spinners) waitpid(p, nullptr, 0);
  EXPECT_EQ(r.cpu1_seen, std::set<std::string>{"1"}) << "cpu1 went offline under other work";
  ASSERT_FALSE(r.result["timeline"].empty());
  for (const auto& e : r.result["timeline"]) EXPECT_EQ(e.value("cores", 0), 2) << e.dump();
}

TEST_F(HotplugTest, SigtermRestores) {
  pid_t pid = hold_one_core();
  kill(pid, SIGTERM);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_EQ(slurp(kCpu1), "1");
  EXPECT_FALSE(fs::exists(state));
}

// libcpupower on a fake acpi-cpufreq tree: userspace governor and a fixed
// frequency; the original governor comes back.
TEST(FreqFakeTree, UserspaceGovernorSetAndRestored) {
  std::string fake = make_temp_dir("cpufreq");
  put(fake + "/online", "0-1");
  put(fake + "/present", "0-1");
  for (int c = 0; c < 2; ++c) {
    std::string d = fake + "/cpu" + std::to_string(c) + "/cpufreq/";
    put(d + "scaling_driver", "acpi-cpufreq");
    put(d + "scaling_governor", "ondemand");
    put(d + "scaling_available_governors", "conservative ondemand userspace powersave performance");
    put(d + "scaling_available_frequencies", "2400000 2000000 1600000 1200000");
    put(d + "cpuinfo_min_freq", "1200000");
    put(d + "cpuinfo_max_freq", "2400000");
    put(d + "scaling_min_freq", "1200000");
    put(d + "scaling_max_freq", "2400000");
    put(d + "scaling_cur_freq", "2400000");
    // libcpupower writes without truncating, as sysfs allows; a regular file
    // needs an old value no longer than the new one.
    put(d + "scaling_setspeed", "2400000");
  }
  mount_over(fake, "/sys/devices/system/cpu");
  std::string state = make_temp_dir("kstate") + "/state.json";
  {
    xfer::KernelJournal j(state);
    xfer::FreqControl fc(j);
    ASSERT_TRUE(fc.available());
    EXPECT_EQ(fc.driver(), "acpi-cpufreq");
    unsigned long lo = 0, hi = 0;
    ASSERT_TRUE(fc.limits(0, &lo, &hi));
    EXPECT_EQ(lo, 1200000u);
    EXPECT_EQ(hi, 2400000u);
    EXPECT_EQ(fc.frequencies(0).size(), 4u);
    EXPECT_EQ(fc.set_khz(1600000), "userspace");
    for (int c = 0; c < 2; ++c) {
      std::string d = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/cpufreq/";
      EXPECT_EQ(slurp(d + "scaling_governor"), "userspace");
      EXPECT_EQ(slurp(d + "scaling_setspeed"), "1600000");
    }
    EXPECT_THROW(fc.set_khz(3000000), std::runtime_error);  // outside the hardware range
  }
  EXPECT_EQ(slurp("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"), "ondemand");
  EXPECT_EQ(slurp("/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"), "ondemand");
  EXPECT_EQ(slurp("/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq"), "2400000");
  EXPECT_FALSE(fs::exists(state));
  umount2("/sys/devices/system/cpu", MNT_DETACH);
}

// intel_pstate has no userspace governor: the frequency becomes a cap on
// scaling_max_freq, restored afterwards.
TEST(FreqFakeTree, NoUserspaceGovernorCapsMaxFreq) {
  std::string fake = make_temp_dir("cpufreq");
  put(fake + "/online", "0");
  put(fake + "/present", "0");
  std::string d = fake + "/cpu0/cpufreq/";
  put(d + "scaling_driver", "intel_pstate");
  put(d + "scaling_governor", "powersave");
  put(d + "scaling_available_governors", "performance powersave");
  put(d + "cpuinfo_min_freq", "800000");
  put(d + "cpuinfo_max_freq", "3500000");
  put(d + "scaling_min_freq", "800000");
  put(d + "scaling_max_freq", "3500000");
  mount_over(fake, "/sys/devices/system/cpu");
  std::string state = make_temp_dir("kstate") + "/state.json";
  {
    xfer::KernelJournal j(state);
    xfer::FreqControl fc(j);
    EXPECT_EQ(fc.set_khz(2000000), "max-cap");
    EXPECT_EQ(slurp("/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq"), "2000000");
    EXPECT_EQ(slurp("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"), "powersave");
  }
  EXPECT_EQ(slurp("/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq"), "3500000");
  umount2("/sys/devices/system/cpu", MNT_DETACH);
}

// libpowercap on a fake intel-rapl tree: package and dram zones, counter wrap.
TEST(PowercapFakeRapl, MeasuresPackageAndDramAcrossAWrap) {
  // /sys/class/powercap does not exist here and sysfs takes no mkdir: a
  // tmpfs over /sys/class, in this test's own mount namespace, holds it.
  std::string fake = make_temp_dir("sysclass");
  std::string pc = fake + "/powercap/";
  const uint64_t max_uj = 262143328850ull;
  auto zone = [&](const std::string& dir, const std::string& name, uint64_t energy) {
    put(pc + dir + "/name", name);
    put(pc + dir + "/energy_uj", std::to_string(energy));
    put(pc + dir + "/max_energy_range_uj", std::to_string(max_uj));
    put(pc + dir + "/enabled", "1");
    put(pc + dir + "/constraint_0_name", "long_term");
    put(pc + dir + "/constraint_0_power_limit_uw", "65000000");
    put(pc + dir + "/constraint_0_time_window_us", "28000000");
    put(pc + dir + "/constraint_1_name", "short_term");
    put(pc + dir + "/constraint_1_power_limit_uw", "80000000");
    put(pc + dir + "/constraint_1_time_window_us", "2440");
  };
  put(pc + "intel-rapl/enabled", "1");
  // As the kernel lays it out: zones nested under the control type.
  zone("intel-rapl/intel-rapl:0", "package-0", max_uj - 1'000'000);  // 1 J before the wrap
  zone("intel-rapl/intel-rapl:0/intel-rapl:0:0", "core", 100);
  zone("intel-rapl/intel-rapl:0/intel-rapl:0:1", "dram", 5'000'000);
  mount_over(fake, "/sys/class");
  xfer::RaplMeter m(/*idle_watts=*/2.0);
  EXPECT_EQ(m.zones(), 2u);  // package + dram; core is inside package
  put("/sys/class/powercap/intel-rapl/intel-rapl:0/energy_uj", "2000000");  // wrapped: 1 J + 2 J
  put("/sys/class/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:1/energy_uj", "6500000");  // +1.5 J
  xfer::EnergySample s = m.sample();
  EXPECT_NEAR(s.joules, 4.5, 1e-6);
  EXPECT_TRUE(s.measured);
  EXPECT_EQ(s.source, "rapl");
  EXPECT_NEAR(s.dynamic_joules, 4.5 - 2.0 * s.interval_s, 1e-6);
  EXPECT_EQ(xfer::make_energy_meter({})->source(), "rapl");
  umount2("/sys/class", MNT_DETACH);
}

// Without RAPL the meter falls back to the model and says so.
TEST(PowercapFakeRapl, AbsentRaplFallsBackToTheModel) {
  if (fs::exists("/sys/class/powercap/intel-rapl")) GTEST_SKIP() << "this machine has RAPL";
  auto m = xfer::make_energy_meter({});
  EXPECT_EQ(m->source(), "model:cpu");
  EXPECT_FALSE(m->measured());
  EXPECT_FALSE(m->sample().measured);
  EXPECT_NE(sh(bin("xferctl") + " calibrate --out /dev/null > /dev/null 2>&1"), 0);  // refuses: nothing to fit against
}

// xferd holding the kernel layer for a job (hotplug), killed with -9: cpu1
// stays offline until the next xferd starts and restores it; that xferd then
// carries the job on.
TEST_F(HotplugTest, XferdRestoresCoresAtTheNextStartAfterKillNine) {
  Dataset d = dataset(4, 1, 1, 0.1);
  Nginx nginx(d.dir, "2m");
  PrivateBus bus;
  // The cores it sets are the jobs' asks alone (busy_cores = "taken"): other
  // tests beside this one keep cores busy, which would keep cpu1 online.
  Xferd x("[daemon]\ninterval_ms = 500\n[kernel]\nmode = \"hotplug\"\nbusy_cores = \"taken\"\nstate_file = \"" +
          state + "\"\n");
  x.start();
  std::string dest = make_temp_dir("dest");
  std::string m = make_temp_dir("manifest") + "/m.txt";
  std::ofstream(m) << d.manifest(nginx.url(false, "/slow/"));
  // min-energy starts at the floor, 1 core.
  Shell s = run(bin("xferctl") + " submit --policy min-energy --manifest " + m + " --dest " + dest);
  ASSERT_EQ(s.status, 0) << s.out;
  // Offline once its ask has stood kernel.offline_after_s (2 s).
  for (int i = 0; i < 200 && slurp(kCpu1) != "0"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(slurp(kCpu1), "0") << x.log();
  x.kill9();
  EXPECT_EQ(slurp(kCpu1), "0") << "nothing restores after kill -9 but the next start";
  x.start();
  EXPECT_NE(x.log().find("restored the cores / frequency a previous xferd left changed"), std::string::npos) << x.log();
  Shell w = run(bin("xferctl") + " watch 1 --json");
  EXPECT_EQ(w.status, 0) << w.out;
  expect_identical(d, dest);
  // The carried-on job took the layer again and gave it back when it ended.
  x.stop();
  EXPECT_EQ(slurp(kCpu1), "1");
}

// The quick wan bench: every client runs and every byte verifies (nothing
// about speed is asserted). Its min-energy client may take cpu1 offline
// (--kernel hotplug), so it runs here, one at a time with the other hotplug
// tests; the cores are all back after every run.
TEST_F(HotplugTest, QuickWanBenchRunsEveryClientAndVerifiesEveryByte) {
  std::string out = make_temp_dir("bench");
  std::string scenario = std::string(XFER_SOURCE_DIR) + "/tests/bench/wan.toml";
  int rc = sh(bin("xfer-bench") + " " + scenario + " --quick --index 240 --out " + out + " > " + out + "/stdout 2> " +
              out + "/stderr");
  EXPECT_EQ(rc, 0) << "see " << out << "/stderr";
  auto rows = bench::read_csv(out + "/results.csv");
  size_t n_datasets = 0, n_clients = 0;
  std::ifstream toml(scenario);
  for (std::string line; std::getline(toml, line);)
    n_datasets += line.rfind("[[dataset]]", 0) == 0, n_clients += line.rfind("[[client]]", 0) == 0;
  ASSERT_GE(n_datasets, 5u);  // html, image, video, one large file, mixed
  ASSERT_EQ(rows.size(), n_datasets * n_clients);  // every dataset x every client x 1 repeat
  std::set<std::string> clients, datasets;
  for (const auto& r : rows) {
    EXPECT_TRUE(r.verified) << r.dataset << " " << r.client << ": " << r.files_ok << "/" << r.files;
    EXPECT_EQ(r.exit_code, 0) << r.client;
    EXPECT_GT(r.bytes, 0u);
    EXPECT_GT(r.client_cpu_s, 0);
    EXPECT_NE(r.energy_source.find("model"), std::string::npos);
    // End-system: the idle draw of the cores online over the run on top of
    // the dynamic part. Every core stays online for the other clients; the
    // min-energy client may run on fewer (hotplug), never on none.
    double all = r.wall_s * double(sysconf(_SC_NPROCESSORS_CONF)), tol = 0.1 + 0.02 * r.wall_s;
    if (r.goal == "min-energy") {
      EXPECT_LE(r.core_s, all + tol) << r.client;
      EXPECT_GE(r.core_s, r.wall_s - tol) << r.client;
    } else {
      EXPECT_NEAR(r.core_s, all, tol) << r.client;
    }
    EXPECT_GT(r.end_j_per_gb, r.j_per_gb) << r.client;
    clients.insert(r.client);
    datasets.insert(r.dataset);
  }
  EXPECT_EQ(clients.size(), n_clients);
  EXPECT_EQ(datasets.size(), n_datasets);
  EXPECT_EQ(slurp(kCpu1), "1") << "a core stayed offline after the bench";
  std::ifstream err(out + "/stderr");
  std::string errs((std::istreambuf_iterator<char>(err)), {});
  EXPECT_EQ(errs.find("brought back online"), std::string::npos) << "a client left a core offline:\n" << errs;
  std::ifstream md(out + "/summary.md");
  std::string summary((std::istreambuf_iterator<char>(md)), {});
  for (const auto& c : clients) EXPECT_NE(summary.find("| " + c + " |"), std::string::npos) << c;
  for (const auto& d : datasets) {
    std::ifstream svg(out + "/plot-" + d + ".svg");
    std::string s((std::istreambuf_iterator<char>(svg)), {});
    EXPECT_EQ(s.rfind("<svg", 0), 0u) << d;
    EXPECT_NE(s.find("</svg>"), std::string::npos);
  }
  std::ifstream lj(out + "/logs/linkemu.json");
  std::string link((std::istreambuf_iterator<char>(lj)), {});
  EXPECT_NE(link.find("\"stopped\":true"), std::string::npos) << link;
  std::string ns;
  FILE* p = popen("ip netns list", "r");
  char buf[256];
  while (p && fgets(buf, sizeof buf, p)) ns += buf;
  pclose(p);
  EXPECT_EQ(ns.find("xfer-bench240"), std::string::npos) << "namespaces left: " << ns;
  fs::remove_all(out);
}

// The kernel layer serves the running jobs together (issue 39): min-energy
// alone takes cpu1 offline; a max-throughput job beside it brings cpu1 back
// (the most any job asks for is set), and when that job is done the cores go
// back to what min-energy asks; when xferd stops, every core is back.
TEST_F(HotplugTest, XferdSetsTheCoresTheRunningJobsAskForTogether) {
  Dataset d = dataset(0, 0, 2, 0.2);
  const auto t0 = std::chrono::steady_clock::now();
  auto at = [&](const char* what) {
    std::printf("%5.1f s: %s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), what);
  };
  Nginx nginx(d.dir, "2m");
  PrivateBus bus;
  // The cores it sets are the jobs' asks alone (busy_cores = "taken"): other
  // tests beside this one keep cores busy, which would keep cpu1 online.
  Xferd x("[daemon]\ninterval_ms = 500\n[kernel]\nmode = \"hotplug\"\nbusy_cores = \"taken\"\nstate_file = \"" +
          state + "\"\n");
  x.start();
  const std::string m = make_temp_dir("manifest") + "/m.txt";
  std::ofstream(m) << d.manifest(nginx.url(false, "/slow/"));  // 2 MB/s per connection
  auto wait_cpu1 = [](const std::string& want, int tenths) {
    for (int i = 0; i < tenths && slurp(kCpu1) != want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return slurp(kCpu1);
  };
  Shell a = run(bin("xferctl") + " submit --policy min-energy --manifest " + m + " --dest " + make_temp_dir("dest"));
  ASSERT_EQ(a.status, 0) << a.out;
  ASSERT_EQ(wait_cpu1("0", 100), "0") << x.log();
  at("min-energy alone: cpu1 offline");
  // The bulk job takes the same files unthrottled, so it ends well before
  // the min-energy job: at 2 MB/s a connection, a min-energy job that
  // raised p to 8 once ended before a bulk job on the same path.
  const std::string fast = make_temp_dir("manifest") + "/fast.txt";
  std::ofstream(fast) << d.manifest(nginx.url(false, "/"));
  Shell b = run(bin("xferctl") + " submit --policy max-throughput --manifest " + fast + " --dest " + make_temp_dir("dest"));
  ASSERT_EQ(b.status, 0) << b.out;
  EXPECT_EQ(wait_cpu1("1", 50), "1") << x.log();
  at("max-throughput beside it: cpu1 online");
  EXPECT_NE(x.log().find("kernel layer: 2 cores for job 2 (the most any of 2 jobs asks)"), std::string::npos) << x.log();
  Shell w = run(bin("xferctl") + " watch 2 --json");
  EXPECT_EQ(w.status, 0) << w.out;
  at("max-throughput done");
  // Job 1 still runs (2 MB/s a connection): cpu1 goes again.
  EXPECT_EQ(wait_cpu1("0", 80), "0") << x.log();  // once the ask has stood 2 s
  at("min-energy alone again: cpu1 offline");
  EXPECT_EQ(run(bin("xferctl") + " cancel 1").status, 0);
  x.stop();
  EXPECT_EQ(slurp(kCpu1), "1");
}
