// control/kernel_share: the kernel layer serving every job at once, on a
// fake sysfs tree of four cores (plain files: nothing of the machine changes).
#include "xfer/kernel_share.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using xfer::JobClass;

namespace {

struct FakeCpus {
  FakeCpus() {
    root = fs::temp_directory_path() / ("xfer-kshare-" + std::to_string(getpid()));
    fs::remove_all(root);
    fs::create_directories(root);
    std::ofstream(root / "present") << "0-3\n";
    std::ofstream(root / "online") << "0-3\n";
    for (int c = 1; c < 4; ++c) {
      fs::create_directories(root / ("cpu" + std::to_string(c)));
      std::ofstream(root / ("cpu" + std::to_string(c)) / "online") << "1\n";
    }
  }
  ~FakeCpus() { fs::remove_all(root); }
  // The kernel's derived list (cpu/online) follows the cpuN/online files: the
  // fake writes it after each change, as sysfs would show it.
  int online() {
    std::string list = "0";
    int n = 1;
    for (int c = 1; c < 4; ++c) {
      std::ifstream f(root / ("cpu" + std::to_string(c)) / "online");
      int v = 0;
      f >> v;
      if (v) list += "," + std::to_string(c);
      n += v;
    }
    std::ofstream(root / "online") << list << "\n";
    return n;
  }
  xfer::KernelLayer::Config config() const {
    xfer::KernelLayer::Config k;
    k.mode = xfer::CoreControl::Mode::Hotplug;
    k.sysfs_root = root.string();
    k.state_file = (root / "state.json").string();
    return k;
  }
  fs::path root;
};

}  // namespace

// The most any job asks for is set; a background job's ask counts only when
// no other job asks; a job that leaves takes its ask with it; the layer
// restores the machine when it goes.
TEST(KernelShare, TheMostAnyJobAsksIsSetAndALeavingJobTakesItsAskAway) {
  FakeCpus cpus;
  {
    xfer::KernelLayer layer(cpus.config());
    xfer::KernelShare share(layer);
    cpus.online();
    EXPECT_EQ(share.ask(1, JobClass::Normal, 1, 0), "");  // least energy
    EXPECT_EQ(cpus.online(), 1);
    EXPECT_EQ(share.ask(2, JobClass::Normal, 3, 0), "");  // a job that needs three
    EXPECT_EQ(cpus.online(), 3);
    EXPECT_NE(share.reason().find("3 cores for job 2 (the most any of 2 jobs asks)"), std::string::npos)
        << share.reason();
    EXPECT_EQ(share.ask(3, JobClass::Background, 4, 0), "");  // background: not while others ask
    EXPECT_EQ(cpus.online(), 3);
    share.leave(2);
    EXPECT_EQ(cpus.online(), 1);
    share.leave(1);
    EXPECT_EQ(cpus.online(), 4);  // only the background job asks now
    EXPECT_EQ(share.jobs(), 1u);
    share.ask(3, JobClass::Background, 2, 0);
    EXPECT_EQ(cpus.online(), 2);
  }
  EXPECT_EQ(cpus.online(), 4);  // restored with the layer
}

// A job's tuner is told its policy's range of the shared layer.
TEST(KernelShare, EachJobIsToldItsPolicysRange) {
  FakeCpus cpus;
  xfer::KernelLayer layer(cpus.config());
  xfer::KernelShare share(layer);
  xfer::KernelLayer::Config policy = cpus.config();
  policy.min_cores = 2;
  policy.max_cores = 3;
  xfer::KernelCaps c = share.caps_for(policy);
  EXPECT_EQ(c.cores_present, 3);
  EXPECT_EQ(c.min_cores, 2);
  EXPECT_EQ(share.caps_for(cpus.config()).cores_present, 4);
}
