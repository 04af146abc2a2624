// A fake sysfs cpu tree of four cores (cpu0-3: present, online, cpuN/online)
// in a temporary directory: the kernel layer's tests turn it, and nothing of
// the machine changes. Removed when it goes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "xfer/kernel.h"

struct FakeCpuTree {
  FakeCpuTree() {
    root = std::filesystem::temp_directory_path() /
           ("cpus-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
    std::ofstream(root / "present") << "0-3\n";
    std::ofstream(root / "online") << "0-3\n";
    for (int c = 1; c < 4; ++c) {
      std::filesystem::create_directories(root / ("cpu" + std::to_string(c)));
      std::ofstream(root / ("cpu" + std::to_string(c)) / "online") << "1\n";
    }
    state = (root / "state.json").string();
  }
  ~FakeCpuTree() { std::filesystem::remove_all(root); }
  // The first line of a file of the tree.
  std::string read(const std::string& rel) const {
    std::ifstream f(root / rel);
    std::string s;
    std::getline(f, s);
    return s;
  }
  // The cores online by the cpuN/online files. The kernel's derived list
  // (cpu/online) follows them: written here, as sysfs would show it.
  int online() {
    std::string list = "0";
    int n = 1;
    for (int c = 1; c < 4; ++c)
      if (read("cpu" + std::to_string(c) + "/online") == "1") list += "," + std::to_string(c), ++n;
    std::ofstream(root / "online") << list << "\n";
    return n;
  }
  xfer::CoreControl::Config cfg() const {
    xfer::CoreControl::Config c;
    c.sysfs_root = root.string();
    return c;
  }
  // A hotplug kernel layer on the tree, its journal beside it.
  xfer::KernelLayer::Config layer_config() const {
    xfer::KernelLayer::Config k;
    k.mode = xfer::CoreControl::Mode::Hotplug;
    k.sysfs_root = root.string();
    k.state_file = state;
    k.others_cores = [] { return 0.0; };  // the machine's own load is not the fake tree's
    k.offline_after_s = 0;                 // the hotplug at once (the wait has its own test)
    return k;
  }
  std::filesystem::path root;
  std::string state;
};
