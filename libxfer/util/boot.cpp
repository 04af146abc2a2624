#include "xfer/boot.h"

#include <fstream>

namespace xfer {

const std::string& boot_id() {
  static const std::string id = [] {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string s;
    std::getline(f, s);
    return s.empty() ? std::string("unknown") : s;
  }();
  return id;
}

uint64_t dirty_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    uint64_t kb = 0;
    if (key == "Dirty:" && in >> kb) return kb * 1024;
    in.ignore(256, '\n');
  }
  return UINT64_MAX;
}

}  // namespace xfer
