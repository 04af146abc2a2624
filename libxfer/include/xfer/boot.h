// Facts of the running system that several layers read (the engine's
// progress records, the flow monitor's pin file, the group commit).
#pragma once

#include <cstdint>
#include <string>

namespace xfer {

// This boot's id (/proc/sys/kernel/random/boot_id), "unknown" when unreadable.
const std::string& boot_id();
// The machine's dirty page cache, in bytes (/proc/meminfo), or UINT64_MAX
// when it cannot be read.
uint64_t dirty_bytes();

}  // namespace xfer
