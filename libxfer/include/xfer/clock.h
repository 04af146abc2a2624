#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace xfer {

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Wall-clock seconds since the Unix epoch (history rows, tables, a path's age).
inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace xfer
