// The calibration run behind `xferctl calibrate` (energy-aware §2.2: "for
// each system component we measure the power consumption values for varying
// load levels, then linear regression derives the coefficients").
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "xfer/calibration_run.h"
#include "xfer/energy.h"
#include "xfer/kernel.h"
#include "xfer/log.h"

namespace xfer {
namespace {

using Clock = std::chrono::steady_clock;

// Runs `load` on `threads` threads for `seconds`, sampling power and
// utilisation once a second.
template <typename Load>
void level(RaplMeter& rapl, UtilisationProbe& probe, int threads, double seconds, Load load,
           std::vector<CalibrationSample>* out) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back([&, i] { load(stop, i); });
  rapl.sample();
  probe.sample();
  for (int s = 0; s < int(seconds); ++s) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    EnergySample e = rapl.sample();
    Utilisation u = probe.sample();
    out->push_back({u.cores, u.cpu, u.memory, u.disk, u.nic, e.watts});
  }
  stop = true;
  for (auto& t : pool) t.join();
}

}  // namespace

bool run_calibration(const std::string& out_path, const std::string& kernel_state, double secs) {
  try {
    RaplMeter rapl;
    UtilisationProbe probe;
    KernelJournal journal(kernel_state);
    CoreControl cores(CoreControl::Config{}, journal);
    std::vector<CalibrationSample> samples;
    auto idle = [](std::atomic<bool>& stop, int) {
      while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    };
    log::info("calibrate: idle");
    level(rapl, probe, 1, 2 * secs, idle, &samples);
    int present = cores.present();
    for (int n = present; n >= 1; --n) {
      try {
        cores.set_online(n);
      } catch (const std::exception& e) {
        log::warn("calibrate: {} cores: {}; skipped", n, e.what());
        continue;
      }
      for (int duty : {25, 50, 100}) {
        log::info("calibrate: CPU {}% on {} cores", duty, n);
        level(rapl, probe, n, secs,
              [duty](std::atomic<bool>& stop, int) {
                volatile uint64_t x = 0;
                while (!stop) {
                  auto t0 = Clock::now();
                  while (Clock::now() - t0 < std::chrono::milliseconds(duty / 10)) x = x + 1;
                  std::this_thread::sleep_for(std::chrono::milliseconds(10 - duty / 10));
                }
              },
              &samples);
      }
    }
    journal.restore();
    log::info("calibrate: memory");
    level(rapl, probe, 1, secs,
          [](std::atomic<bool>& stop, int) {
            std::vector<char> big(size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGESIZE)) / 4);
            while (!stop) std::memset(big.data(), 1, big.size());
          },
          &samples);
    log::info("calibrate: disk");
    level(rapl, probe, 1, secs,
          [](std::atomic<bool>& stop, int) {
            char path[] = "/var/tmp/xferd-calibrate-XXXXXX";
            int fd = mkstemp(path);
            unlink(path);
            std::vector<char> block(16 << 20, 7);
            while (!stop && fd >= 0) {
              if (pwrite(fd, block.data(), block.size(), 0) < 0) break;
              fdatasync(fd);
            }
            if (fd >= 0) close(fd);
          },
          &samples);
    PowerCoefficients c = fit_power_model(samples);
    c.save(out_path);
    log::info("calibrate: {} samples; coefficients written to {} (idle {:.1f} W)", samples.size(), out_path, c.idle_watts);
    return true;
  } catch (const std::exception& e) {
    log::error("calibrate: {}", e.what());
    return false;
  }
}

}  // namespace xfer
