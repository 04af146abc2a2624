// util/boot.cpp: the facts of the running system the engine and the flow
// monitor key their files by.
#include <gtest/gtest.h>
#include <systemd/sd-id128.h>

#include <fstream>
#include <string>

#include "xfer/boot.h"

// The progress records' and the flow monitor's boot id is the kernel's, as
// libsystemd reads it (a record from another boot trusts only synced bytes).
TEST(Boot, BootIdIsTheKernels) {
  sd_id128_t id;
  ASSERT_EQ(sd_id128_get_boot(&id), 0);
  char s[SD_ID128_UUID_STRING_MAX];
  EXPECT_EQ(std::string(sd_id128_to_uuid_string(id, s)), xfer::boot_id());
  EXPECT_EQ(&xfer::boot_id(), &xfer::boot_id()) << "read once";
}

// The group commit's syncfs rule reads the machine's dirty page cache: a
// figure within what the machine has, which grows when a file is written.
TEST(Boot, DirtyBytesIsTheMachinesDirtyPageCache) {
  uint64_t total_kb = 0;
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    if (key == "MemTotal:") in >> total_kb;
    in.ignore(256, '\n');
  }
  ASSERT_GT(total_kb, 0u);
  uint64_t dirty = xfer::dirty_bytes();
  ASSERT_NE(dirty, UINT64_MAX) << "/proc/meminfo has no Dirty: line";
  EXPECT_LT(dirty, total_kb * 1024);
}
