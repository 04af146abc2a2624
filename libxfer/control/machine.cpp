#include "xfer/machine.h"

#include <algorithm>
#include <vector>

#include "xfer/clock.h"
#include "xfer/flow_monitor.h"
#include "xfer/proc_stat.h"

namespace xfer {

namespace {

// Interface bytes include the IP and TCP headers the jobs' counts do not.
constexpr double kHeaderAllowance = 1.05;

}  // namespace

uint64_t Machine::now_ns() const { return src_.now_ns ? src_.now_ns() : monotonic_ns(); }

Machine::Machine(Sources s) : src_(std::move(s)) {
  last_ns_ = now_ns();
  if (src_.meter) src_.meter->sample();  // the first sample starts the meter's clock
  if (src_.interface_rx_bytes) last_iface_ = window_iface_ = src_.interface_rx_bytes();
  window_ns_ = last_ns_;
  if (src_.cpu_pct) src_.cpu_pct();
}

void Machine::sample() {
  uint64_t now = now_ns();
  double dt = double(now - last_ns_) / 1e9;
  last_ns_ = now;
  std::optional<double> joules, dynamic;
  if (src_.meter) {
    EnergySample e = src_.meter->sample();
    joules = e.joules;
    dynamic = e.dynamic_joules;
  }
  std::optional<double> cpu = src_.cpu_pct ? src_.cpu_pct() : std::nullopt;
  uint64_t sum = 0;
  std::vector<double> bytes, conn_s;
  for (auto& [id, m] : members_) {
    uint64_t b = m.received();
    m.moved = b >= m.last_bytes ? b - m.last_bytes : 0;
    m.last_bytes = b;
    sum += m.moved;
    bytes.push_back(double(m.moved));
    conn_s.push_back(m.connections ? std::max(0.0, m.connections()) * dt : 0);
  }
  uint64_t external = 0;
  if (src_.interface_rx_bytes) {
    uint64_t iface = src_.interface_rx_bytes();
    double other = iface >= last_iface_ ? double(iface - last_iface_) - double(sum) * kHeaderAllowance : 0;
    external = other > 0 ? uint64_t(other) : 0;
    last_iface_ = iface;
    double window_s = double(now - window_ns_) / 1e9;
    if (window_s >= kLinkWindowS) {
      if (iface >= window_iface_)
        link_peak_bps_ = std::max(link_peak_bps_, double(iface - window_iface_) * 8 / window_s);
      window_ns_ = now, window_iface_ = iface;
    }
  }
  if (joules && !members_.empty()) {
    joules_shared_ += *joules;
    split_.add(dynamic ? *dynamic : *joules, bytes, conn_s);  // what this sample's bytes and connections cost
  }
  const std::vector<double> shares = split_.shares(bytes, conn_s);
  size_t k = 0;
  for (auto& [id, m] : members_) {
    const double share = shares[k++];
    if (joules) m.joules += *joules * share, m.dynamic_joules += *dynamic * share;
    m.external += external;
    if (cpu) m.cpu_weighted += *cpu * dt, m.cpu_s += dt;
  }
}

void Machine::join(uint32_t job, ReceivedBytes received, Connections connections) {
  sample();  // what came before goes to the jobs already here
  Member m;
  m.received = std::move(received);
  m.connections = std::move(connections);
  m.last_bytes = m.received();
  members_[job] = std::move(m);
}


void Machine::replace_meter(std::unique_ptr<EnergyMeter> m) {
  sample();
  src_.meter = std::move(m);
  if (src_.meter) src_.meter->sample();
}

std::string Machine::share_basis() const {
  return "machine energy divided among the jobs running at the time, " + split_.basis();
}

Machine::Share Machine::take(uint32_t job) {
  sample();
  Share s;
  auto it = members_.find(job);
  if (it == members_.end()) return s;
  Member& m = it->second;
  if (src_.meter) s.joules = m.joules, s.dynamic_joules = m.dynamic_joules;
  if (src_.interface_rx_bytes) s.external_bytes = m.external;
  if (link_peak_bps_ > 0) s.link_bps = link_peak_bps_;
  if (m.cpu_s > 0) s.cpu_pct = m.cpu_weighted / m.cpu_s;
  m.joules = m.dynamic_joules = 0;
  m.external = 0;
  m.cpu_weighted = m.cpu_s = 0;
  return s;
}

Machine::Share Machine::leave(uint32_t job) {
  Share s = take(job);
  members_.erase(job);
  return s;
}

std::unique_ptr<Machine> make_machine(const PowerCoefficients& c, EnergyScope scope) {
  Machine::Sources s;
  s.meter = make_energy_meter(c, scope);
  s.interface_rx_bytes = interface_rx_bytes;
  s.cpu_pct = [last = read_cpu_times()]() mutable -> std::optional<double> {
    CpuTimes t = read_cpu_times();
    std::optional<double> pct;
    if (t.total > last.total) pct = 100.0 * double(t.busy - last.busy) / double(t.total - last.total);
    last = t;
    return pct;
  };
  return std::make_unique<Machine>(std::move(s));
}

}  // namespace xfer
