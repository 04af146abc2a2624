// RAPL through libpowercap: the package and dram zones of every socket
// (package already contains core and uncore: adding them would count twice).
#include <powercap/powercap-rapl.h>
#include <time.h>

#include <stdexcept>

#include "xfer/clock.h"
#include "xfer/energy.h"
#include "xfer/log.h"

namespace xfer {
struct RaplMeter::Zone {
  powercap_rapl_pkg* pkg = nullptr;  // shared by the zones of one socket (owned by the package zone)
  bool owner = false;
  powercap_rapl_zone zone;
  std::string name;
  uint64_t max_uj = 0, last_uj = 0;
  ~Zone() {
    if (owner && pkg) {
      powercap_rapl_destroy(pkg);
      delete pkg;
    }
  }
};

uint64_t RaplMeter::delta_uj(uint64_t prev, uint64_t now, uint64_t max_uj) {
  if (now >= prev) return now - prev;
  return max_uj - prev + now;  // the counter wrapped at max_energy_range_uj
}

RaplMeter::RaplMeter(double idle_watts) : idle_w_(idle_watts) {
  if (powercap_rapl_control_is_supported() != 1) throw std::runtime_error("no RAPL: /sys/class/powercap/intel-rapl is absent");
  uint32_t n = powercap_rapl_get_num_instances();
  if (n == 0) throw std::runtime_error("no RAPL packages under /sys/class/powercap");
  for (uint32_t i = 0; i < n; ++i) {
    auto* pkg = new powercap_rapl_pkg();
    if (powercap_rapl_init(i, pkg, 1) != 0) {
      delete pkg;
      throw std::runtime_error("RAPL package " + std::to_string(i) + " unreadable: " + strerror(errno));
    }
    bool first = true;
    for (auto [z, name] : {std::pair{POWERCAP_RAPL_ZONE_PACKAGE, "package"}, std::pair{POWERCAP_RAPL_ZONE_DRAM, "dram"}}) {
      if (powercap_rapl_is_zone_supported(pkg, z) != 1 &&
          powercap_rapl_is_zone_file_supported(pkg, z, POWERCAP_ZONE_FILE_ENERGY_UJ) != 1)
        continue;
      auto zone = std::make_unique<Zone>();
      zone->pkg = pkg;
      zone->owner = first;
      first = false;
      zone->zone = z;
      zone->name = std::string(name) + "-" + std::to_string(i);
      if (powercap_rapl_get_max_energy_range_uj(pkg, z, &zone->max_uj) != 0 ||
          powercap_rapl_get_energy_uj(pkg, z, &zone->last_uj) != 0)
        throw std::runtime_error("RAPL zone " + zone->name + " unreadable (energy_uj needs root on recent kernels)");
      zones_.push_back(std::move(zone));
    }
    if (first) {  // no zone taken ownership
      powercap_rapl_destroy(pkg);
      delete pkg;
    }
  }
  if (zones_.empty()) throw std::runtime_error("RAPL present but no package or dram zone readable");
  last_ns_ = monotonic_ns();
}

RaplMeter::~RaplMeter() {
  // Non-owners first: the owner frees the shared package.
  for (auto& z : zones_)
    if (!z->owner) z.reset();
  zones_.clear();
}

EnergySample RaplMeter::sample() {
  EnergySample s;
  uint64_t now = monotonic_ns();
  s.interval_s = double(now - last_ns_) / 1e9;
  last_ns_ = now;
  uint64_t uj = 0;
  for (auto& z : zones_) {
    uint64_t v = 0;
    if (powercap_rapl_get_energy_uj(z->pkg, z->zone, &v) != 0) {
      log::warn("RAPL zone {}: read failed; this interval misses it", z->name);
      continue;
    }
    uj += delta_uj(z->last_uj, v, z->max_uj);
    z->last_uj = v;
  }
  s.joules = double(uj) / 1e6;
  s.dynamic_joules = std::max(0.0, s.joules - idle_w_ * s.interval_s);
  s.watts = s.interval_s > 0 ? s.joules / s.interval_s : 0;
  s.dynamic_watts = s.interval_s > 0 ? s.dynamic_joules / s.interval_s : 0;
  total_ += s.joules, total_dyn_ += s.dynamic_joules;
  s.total_joules = total_, s.total_dynamic_joules = total_dyn_;
  s.source = "rapl";
  s.measured = true;
  return s;
}

std::unique_ptr<EnergyMeter> make_energy_meter(const PowerCoefficients& c, EnergyScope scope) {
  try {
    auto m = std::make_unique<RaplMeter>(c.idle_watts);
    log::info("energy: RAPL, {} zones (measured)", m->zones());
    return m;
  } catch (const std::exception& e) {
    auto m = std::make_unique<ModelMeter>(c, std::make_unique<UtilisationProbe>("/proc", "/sys", 1000, scope));
    log::warn("energy: {}; falling back to the power model ({}, coefficients: {}): figures are modelled, not measured",
              e.what(), m->source(), c.origin);
    return m;
  }
}

}  // namespace xfer
