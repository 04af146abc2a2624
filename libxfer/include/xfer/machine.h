// Machine-wide figures, measured once and shared among the jobs that run at
// the same time (the daemon's jobs, or xferctl run's one), never charged
// whole to each:
//
//   energy         one EnergyMeter for the machine. Each sample's joules are
//                  divided among the jobs present by what each one's bytes
//                  and connections cost since the previous sample
//                  (EnergySplit, fitted over the machine's samples: a job
//                  holding many connections for few bytes is charged for
//                  them); by bytes until the fit is determined, equal shares
//                  when no job received or held anything. The jobs' joules
//                  add up to the machine's.
//   external load  the interfaces' received bytes minus what every job
//                  received (5% allowed for IP/TCP headers): traffic that is
//                  no xferd job's. Every job sees all of it.
//   CPU            the machine's utilisation, percent of the online CPUs.
//   link rate      the most the interfaces received per second, over
//                  windows of at least kLinkWindowS: what the link has been
//                  seen to carry (a floor under its capacity, measured;
//                  used where no network.bandwidth_mbps is configured).
//
// The machine is sampled whenever a job joins, leaves or closes an interval
// (take), so each job's figures cover exactly its own interval however the
// jobs' intervals interleave.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "xfer/energy.h"

namespace xfer {

class Machine {
 public:
  // Where the figures come from; tests give fakes.
  struct Sources {
    std::unique_ptr<EnergyMeter> meter;            // null: no energy figures
    std::function<uint64_t()> interface_rx_bytes;  // null: no external load
    std::function<std::optional<double>()> cpu_pct;  // utilisation since the previous call; null: none
    std::function<uint64_t()> now_ns;  // null: the monotonic clock (tests give their own)
  };
  explicit Machine(Sources s);
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  // How energy is divided, as the job report says it (the fit so far).
  std::string share_basis() const;

  // A job's cumulative received bytes (its flows' TCP payload, or its
  // fetched bytes without a flow monitor): the share basis and what is
  // subtracted from the interfaces.
  using ReceivedBytes = std::function<uint64_t()>;
  // The connections a job holds now (its channels in effect); null: none
  // counted, the job's share then follows its bytes alone.
  using Connections = std::function<double()>;
  void join(uint32_t job, ReceivedBytes received, Connections connections = {});

  // What a job is owed since its previous take (or its join).
  struct Share {
    std::optional<double> joules;          // this job's share
    std::optional<double> dynamic_joules;  // of it, above the idle draw (EnergySample::dynamic_joules)
    std::optional<uint64_t> external_bytes;  // received on the interfaces, by no job
    std::optional<double> cpu_pct;         // mean over the interval
    std::optional<double> link_bps;        // the highest receive rate seen so far (0 < it)
  };
  static constexpr double kLinkWindowS = 0.25;
  Share take(uint32_t job);
  // The last share, and the job is gone from the shares.
  Share leave(uint32_t job);

  const EnergyMeter* meter() const { return src_.meter.get(); }
  // Another meter from now on (a reloaded power model): what the old one
  // counted so far is shared out first.
  void replace_meter(std::unique_ptr<EnergyMeter> m);
  // Joules the meter counted while at least one job was present.
  double joules_shared() const { return joules_shared_; }
  size_t jobs() const { return members_.size(); }

 private:
  struct Member {
    ReceivedBytes received;
    Connections connections;
    uint64_t last_bytes = 0;
    uint64_t moved = 0;  // received in the sample being divided
    double joules = 0, dynamic_joules = 0;
    uint64_t external = 0;
    double cpu_weighted = 0, cpu_s = 0;
  };
  void sample();
  uint64_t now_ns() const;
  Sources src_;
  std::map<uint32_t, Member> members_;
  uint64_t last_ns_ = 0;
  uint64_t last_iface_ = 0;
  double joules_shared_ = 0;
  // The machine's energy among the jobs; a sample's weight halves over
  // about 70 samples (each job's interval samples the machine).
  static constexpr double kSplitForget = 0.99;
  EnergySplit split_{kSplitForget};
  // The link-rate window: its start and the interface bytes then.
  uint64_t window_ns_ = 0, window_iface_ = 0;
  double link_peak_bps_ = 0;
};

// The machine for this process: RAPL if there is one, else the power model
// with these coefficients (make_energy_meter says which); the interfaces of
// this network namespace; /proc/stat.
std::unique_ptr<Machine> make_machine(const PowerCoefficients& c, EnergyScope scope = EnergyScope::Machine);

}  // namespace xfer
