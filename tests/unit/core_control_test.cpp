// CoreControl and the kernel journal against a fake cpu tree.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
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
