// CoreControl and the kernel journal against a fake cpu tree.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <fstream>

#include "fake_cpus.h"
#include "xfer/kernel.h"

namespace fs = std::filesystem;

class CoreFakeTree : public ::testing::Test, public FakeCpuTree {};

TEST_F(CoreFakeTree, OfflinesHighestFirstAndRestores) {
  {
    xfer::KernelJournal j(state, root.string());
    xfer::CoreControl cc(cfg(), j);
    EXPECT_EQ(cc.present(), 4);
    cc.set_online(2);
    EXPECT_EQ(read("cpu3/online"), "0");
    EXPECT_EQ(read("cpu2/online"), "0");
    EXPECT_EQ(read("cpu1/online"), "1");
    EXPECT_TRUE(fs::exists(state));  // journalled before the change
  }  // destructor restores
  EXPECT_EQ(read("cpu3/online"), "1");
  EXPECT_EQ(read("cpu2/online"), "1");
  EXPECT_FALSE(fs::exists(state));
}

TEST_F(CoreFakeTree, RefusesWhatItMayNotDo) {
  xfer::KernelJournal j(state, root.string());
  auto c = cfg();
  c.min_cores = 2;
  xfer::CoreControl cc(c, j);
  try {
    cc.set_online(1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("below the configured minimum of 2"), std::string::npos);
  }
  EXPECT_THROW(cc.set_online(5), std::invalid_argument);
  auto only3 = cfg();
  only3.allowed = {0, 3};  // cpu0 is dropped from the list: never offline
  xfer::CoreControl c3(only3, j);
  EXPECT_THROW(c3.set_online(2), std::invalid_argument);  // cpu1 and cpu2 may not go
  c3.set_online(3);
  EXPECT_EQ(read("cpu3/online"), "0");
  EXPECT_EQ(read("cpu1/online"), "1");
}

// A process that dies without restoring: the next journal restores at start.
TEST_F(CoreFakeTree, LeftoverStateIsRestoredAtTheNextStart) {
  pid_t pid = fork();
  if (pid == 0) {
    xfer::KernelJournal* j = new xfer::KernelJournal(state, root.string());
    xfer::CoreControl cc(cfg(), *j);
    cc.set_online(1);
    _exit(0);  // no destructors: like kill -9
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(read("cpu1/online"), "0");
  EXPECT_TRUE(fs::exists(state));
  xfer::KernelJournal next(state, root.string());
  EXPECT_EQ(read("cpu1/online"), "1");
  EXPECT_EQ(read("cpu3/online"), "1");
  EXPECT_FALSE(fs::exists(state));
}

// A policy's core range (xferd's [policy] max_cores) bounds what a tuner asks for.
TEST_F(CoreFakeTree, KernelLayerKeepsToThePolicysRange) {
  xfer::KernelLayer::Config k = layer_config();
  k.min_cores = 1;
  k.max_cores = 2;
  {
    xfer::KernelLayer layer(k);
    EXPECT_EQ(layer.caps().cores_present, 2);  // what the tuner is told it may use
    EXPECT_EQ(layer.apply(4, 0), "");
    // 4 asked, 2 allowed: cpu0 and cpu1 (the fake tree's "online" list is static; the cpuN files say it)
    EXPECT_EQ(read("cpu1/online"), "1");
    EXPECT_EQ(read("cpu2/online"), "0");
    EXPECT_EQ(read("cpu3/online"), "0");
  }
  EXPECT_EQ(read("cpu1/online"), "1");  // restored when the layer goes
  EXPECT_EQ(read("cpu3/online"), "1");
}

TEST(CoreCpuList, ParsesKernelLists) {
  EXPECT_EQ(xfer::parse_cpu_list("0-3,5,7-8"), (std::vector<int>{0, 1, 2, 3, 5, 7, 8}));
  EXPECT_EQ(xfer::parse_cpu_list("0"), (std::vector<int>{0}));
  EXPECT_TRUE(xfer::parse_cpu_list("").empty());
}

// Issue 54: a core other processes keep busy is never taken offline. Two
// `yes` (2 cores busy) and a job asking for 1 core of 4: 3 stay online; the
// load gone, the next interval (keep_up) lets them go; in affinity mode
// nothing is kept for others (only xferd's threads are confined).
TEST_F(CoreFakeTree, ACoreOtherWorkUsesIsNeverTakenOffline) {
  double others = 2.0;
  xfer::KernelLayer::Config k = layer_config();
  k.mode = xfer::CoreControl::Mode::Hotplug;
  k.others_cores = [&] { return others; };
  {
    xfer::KernelLayer layer(k);
    EXPECT_EQ(layer.apply(1, 0), "");
    EXPECT_EQ(online(), 3);
    others = 0.1;  // a tenth of a core is no core
    EXPECT_EQ(layer.keep_up(), "");
    EXPECT_EQ(online(), 1);
    others = 3.6;  // more than there is: every core
    EXPECT_EQ(layer.keep_up(), "");
    EXPECT_EQ(online(), 4);
  }
  EXPECT_EQ(online(), 4);
  k.mode = xfer::CoreControl::Mode::Affinity;
  others = 2.0;
  xfer::KernelLayer aff(k);
  EXPECT_EQ(aff.keep_up(), "");
  EXPECT_EQ(online(), 4);
}

// Issue 54: a core goes offline only once the ask for fewer has stood
// kernel.offline_after_s; meanwhile this process's threads run on the cores
// that will stay (affinity), and the layer reports those. A step up is at
// once, and one that comes before the wait is over takes nothing offline.
// In a child: the confinement is this process's own.
TEST_F(CoreFakeTree, AStepDownWaitsOnAffinityUntilTheAskHasStood) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    int failed = 0;
    auto check = [&](bool ok, const char* what) {
      if (!ok) fprintf(stderr, "failed: %s\n", what), ++failed;
    };
    auto mask = [] {
      cpu_set_t set;
      CPU_ZERO(&set);
      sched_getaffinity(0, sizeof set, &set);
      return set;
    };
    const cpu_set_t started = mask();
    double t = 100;
    xfer::KernelLayer::Config k = layer_config();
    k.offline_after_s = 2;
    k.clock = [&] { return t; };
    {
      xfer::KernelLayer layer(k);
      check(layer.apply(1, 0).empty(), "apply 1");
      check(online() == 4, "nothing offline at the ask");
      check(layer.cores() == 1 && layer.in_effect().cores == 1, "the job runs on 1 core");
      cpu_set_t m = mask();
      check(CPU_COUNT(&m) == 1 && CPU_ISSET(0, &m), "confined to cpu0");
      t += 1.0;
      check(layer.keep_up().empty() && online() == 4, "nothing offline after 1 s");
      t += 1.5;
      check(layer.keep_up().empty() && online() == 1, "offline after 2.5 s");
      m = mask();
      check(CPU_EQUAL(&m, &started), "the mask it started with, once the cores are offline");
      check(layer.apply(3, 0).empty() && online() == 3, "a step up at once");
      check(layer.apply(1, 0).empty() && online() == 3 && layer.cores() == 1, "a new step down waits again");
      t += 0.5;
      check(layer.apply(2, 0).empty() && online() == 3 && layer.cores() == 2, "a smaller step down waits too");
      t += 0.5;
      check(layer.apply(3, 0).empty() && online() == 3 && layer.cores() == 3, "asked back before the wait is over");
      m = mask();
      check(CPU_EQUAL(&m, &started), "confinement undone");
      t += 5;
      check(layer.keep_up().empty() && online() == 3, "nothing went offline");
      check(layer.apply(1, 0).empty(), "apply 1 again");
    }
    cpu_set_t m = mask();
    check(CPU_EQUAL(&m, &started), "the layer gone, the mask it started with");
    check(online() == 4, "restored");
    _exit(failed == 0 ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "see the child's lines above";
}

// Affinity mode confines every thread it lists; one that ends between the
// listing and the call (curl's resolver threads come and go) is not an
// error: a job's cores were refused with "sched_setaffinity(N): No such
// process" in CI. Run in a child, so this process keeps all its CPUs.
TEST_F(CoreFakeTree, AffinityIgnoresAThreadThatEndsWhileItIsConfined) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    std::atomic<bool> stop{false};
    std::thread churn([&] {
      while (!stop) std::thread([] {}).join();
    });
    int failed = 0;
    {
      xfer::KernelJournal j(state, root.string());
      auto c = cfg();
      c.mode = xfer::CoreControl::Mode::Affinity;
      xfer::CoreControl cc(c, j);
      for (int i = 0; i < 400; ++i) {
        try {
          cc.set_online(1 + i % 2);
        } catch (const std::exception& e) {
          ++failed;
          fprintf(stderr, "%s\n", e.what());
        }
      }
    }
    stop = true;
    churn.join();
    _exit(failed == 0 ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "a thread that ended made set_online fail";
}

// The sampler itself: a child that spins is other work (about a core). (That
// this process's own CPU is left out is not asserted here: other tests run
// beside this one and their load is other work too.)
TEST(OthersLoad, CountsAChildThatSpinsAsAboutACore) {
  pid_t spinner = fork();
  if (spinner == 0) {
    alarm(20);
    volatile unsigned long n = 0;
    for (;;) n = n + 1;
  }
  double seen = 0;
  {
    xfer::OthersLoad load;
    for (int i = 0; i < 30 && seen < 0.6; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      seen = load.cores();
    }
  }
  kill(spinner, SIGKILL);
  waitpid(spinner, nullptr, 0);
  EXPECT_GE(seen, 0.6) << "a spinning process is about one core";
}
