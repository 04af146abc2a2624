// OthersLoad: the cores other processes keep busy (xfer/kernel.h).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "xfer/kernel.h"
#include "xfer/proc_stat.h"

namespace xfer {
namespace {

double now_s(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

}  // namespace

OthersLoad::Sample OthersLoad::read() const {
  static const double hz = double(std::max(1L, sysconf(_SC_CLK_TCK)));
  Sample s;
  s.wall = now_s(CLOCK_MONOTONIC);
  s.machine_busy = double(read_cpu_times(proc_).busy) / hz;
  s.self = now_s(CLOCK_PROCESS_CPUTIME_ID);
  return s;
}

double OthersLoad::between(const Sample& a, const Sample& b) {
  const double wall = b.wall - a.wall;
  if (wall <= 0) return 0;
  return std::max(0.0, (b.machine_busy - a.machine_busy) - (b.self - a.self)) / wall;
}

OthersLoad::OthersLoad(std::string proc) : proc_(std::move(proc)) {
  // A first figure before any decision: the machine's load before the job.
  Sample a = read();
  std::this_thread::sleep_for(std::chrono::milliseconds(kFirstMs));
  last_ = read();
  cores_ = between(a, last_);
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> g(mu_);
    while (!stop_) {
      if (wake_.wait_for(g, std::chrono::milliseconds(kEveryMs), [this] { return stop_; })) break;
      Sample s = read();
      // Smoothed over about four samples (2 s): a burst does not hold a core
      // online for long, a steady load is seen within seconds.
      cores_ = 0.75 * cores_.load() + 0.25 * between(last_, s);
      last_ = s;
    }
  });
}

OthersLoad::~OthersLoad() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace xfer
