// The arbiter: what the jobs running at once share, owned in one place and
// divided by their SLAs (DESIGN.md "Many jobs on one machine"). Today the
// link; each job's tuner then decides within its allotment, which the
// ControlLoop applies as a rate cap under the tuner's own.
//
//   floors first  a job with a throughput floor (throughput-target,
//                 hla-throughput) is never capped, and its floor (plus a
//                 margin) is set aside; the others share what is left
//   ceilings next a job with an energy ceiling (hla-energy) has the rate it
//                 needs to stay under it set aside next, and its share of
//                 the rest on top
//   classes       foreground > high > normal > low > background, as Windows
//                 BITS has them: a class gets what the classes above it leave,
//                 so background gets only capacity nobody else asks for
//   users         within a class the rest is split among users by weight
//                 (FTS3's activity shares), then among a user's jobs equally:
//                 a user with ten jobs gets what a user with one gets
//   demand        a job moving well under its cap does not need it: it is
//                 allotted what it moves plus a quarter, and what it leaves
//                 goes to the others (no capacity left idle); a job moving
//                 near its cap, or new, asks for as much as it can get
//
// The capacity is the configured link (network.bandwidth_mbps in xferd.conf)
// or, when none is configured, what the jobs together moved while their
// flows showed the link full: a queue building on the path (each job's RTT
// well above the least it has seen). What the jobs move is no evidence by
// itself: a server's per-connection limit, or a job that asks for little,
// moves little on a link that carries far more. Until there is evidence the
// capacity is not known, and no job is capped nor a floor refused by it
// (issue 54: two jobs held to 37 Mbit/s "measured" from earlier jobs a
// server limited, on a path one job alone moved 478 over). A known capacity
// doubles at each round of intervals in which every capped job moved at its
// cap and no flow queued, so an estimate that caps is never a ceiling for
// long.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace xfer {

enum class JobClass { Background, Low, Normal, High, Foreground };  // ascending priority
const char* to_string(JobClass c);
std::optional<JobClass> job_class_from(const std::string& s);
// The class names, highest first (the config's and Submit's choices).
const std::vector<std::string>& job_class_names();

// A job's claim on the link, as the arbiter divides it.
struct LinkClaim {
  uint32_t id = 0;
  uint32_t user = 0;
  JobClass cls = JobClass::Normal;
  double weight = 1;     // its user's weight within its class
  double floor_bps = 0;  // throughput promised; 0: none
  double ceiling_j_per_gb = 0;  // energy per GB promised not to exceed (hla-energy); 0: none
  std::vector<std::string> origins;  // scheme://host:port it fetches from (for the connection limit)
};

struct Allotment {
  double cap_bps = 0;  // the job's rate cap; 0: none
  std::string reason;  // why, with the figures
  // Connections the job may have open at once to an origin it shares with
  // other jobs under ArbiterConfig::origin_connections; an origin not here
  // is not limited.
  std::map<std::string, int> connections;
  bool operator==(const Allotment&) const = default;
};

// One job's claim on the link for one division.
struct Claim {
  LinkClaim job;
  double demand_bps = std::numeric_limits<double>::infinity();  // infinity: as much as it can get
  int connections = 0;  // connections its tuner asks for (cc x p); 0: as many as it can get
  // A job under an energy ceiling: the rate it needs to stay under it (what
  // it moves times its energy per GB over the ceiling: its power hardly
  // depends on its rate, so a slower job spends more per GB); 0: not known.
  double ceiling_need_bps = 0;
};

struct ArbiterConfig {
  double capacity_bps = 0;     // the link; 0: measured
  // The share of a configured link's rate the jobs' bodies can have: TCP/IP
  // headers take 3.5% at a 1500-byte MTU, and a link filled to its last bit
  // queues. Divided whole, a 300 Mbit/s link left the one job with the
  // largest share 126 of its 150 Mbit/s while the others held theirs.
  double goodput = 0.95;
  double limit_bps = 0;        // a limit below the link (the bandwidth schedule); 0: none
  double floor_margin = 0.1;   // a floor sets aside this much more than itself
  double min_bps = 1e6;        // no job is capped below this (it keeps moving)
  double demand_slack = 1.25;  // a job under its cap is allotted what it moves times this
  double busy = 0.8;           // a job moving at least this share of its cap asks for more
  int low_intervals = 3;       // ...and one under it this many intervals in a row asks for what it moves
  // A floor that moves under this share of itself for this many intervals in
  // a row (what it fetches from cannot carry it) gives its reservation back.
  double floor_starved_share = 0.5;
  int floor_release_intervals = 6;
  // A job's path queues when its flows' RTT is above the least it has seen
  // by this share of it and this many ms, in this many of its intervals in a
  // row: the link is full. One interval is no evidence: on loopback, with
  // both cores busy, one stalled reader raised the RTT from 7 to 30 ms and
  // two jobs a server held to 16 Mbit/s a connection were capped at 37.
  double queue_share = 0.25;
  double queue_ms = 2;
  int queue_intervals = 2;
  // A job that arrives and moves at least this share of what the others
  // moved before it, while they fall by at least half of what it moves and
  // all together move no more than arrival_sum_share of what they moved
  // before: it took its rate from them, and the link is full at the sum (a
  // drop-tail queue a job alone already filled shows no rise in RTT).
  double arrival_share = 0.2;
  double arrival_sum_share = 1.15;
  int arrival_rounds = 4;  // rounds of observations after an arrival this is looked for
  // ...and it must hold in this many looks in a row, on each job's rate over
  // its last two intervals: a server that sends in bursts (nginx's
  // limit_rate) moves 0 and 33 Mbit/s in turn, and one job's pause beside the
  // other's burst is no taking.
  int arrival_confirm = 2;
  // Connections open at once to one origin over all the jobs (servers cap
  // the connections per client: aria2 issues 577, 1039); 0: no limit but
  // each job's own max_channels.
  int origin_connections = 0;
};

// The division itself, for a capacity and the claims (unit-tested alone).
std::map<uint32_t, Allotment> divide_link(double capacity_bps, const std::vector<Claim>& claims,
                                          const ArbiterConfig& cfg);

// The connections to each origin several jobs share, for a limit per origin
// (unit-tested alone): floors first (each other job keeps one), then the
// classes in order, users by weight and a user's jobs equally, as the link;
// a job asking for fewer gets what it asks for and one more, so that it can
// grow. Every job keeps at least one connection.
std::map<uint32_t, std::map<std::string, int>> divide_connections(int limit, const std::vector<Claim>& claims);

class Arbiter {
 public:
  explicit Arbiter(ArbiterConfig c = {});

  // A job's allotment changed: the callback given at join (the job's ControlLoop).
  using Apply = std::function<void(const Allotment&)>;
  void join(const LinkClaim& j, Apply apply);
  void leave(uint32_t id);
  // A job's last interval: what it moved (bits/s). Divides again.
  // joules_per_gb: what its interval cost per GB (0: not known), for an
  // energy ceiling. rtt_ms: its flows' RTT this interval, weighted by their
  // bytes (0: not known), the evidence a measured capacity rests on.
  void observe(uint32_t id, double throughput_bps, int connections = 0, double joules_per_gb = 0,
               double rtt_ms = 0);

  // The per-origin connection limit changed (Reload); 0: none.
  void set_origin_connections(int n);
  // The configured capacity changed (Reload); 0: measured.
  void set_capacity(double bps);
  // The schedule's limit in force changed; 0: none. Unlike the link's
  // capacity, a limit caps a job alone too.
  void set_limit(double bps);
  double capacity_bps() const;  // in use now (0: unknown yet)
  bool capacity_measured() const { return cfg_.capacity_bps <= 0; }
  // A measured capacity's evidence, for the log and the metrics: "" when
  // configured.
  std::string capacity_basis() const;

  // "" when a floor of floor_bps fits on the link beside the floors already
  // admitted (admitted_bps: the jobs running and those waiting, which the
  // daemon knows), each with its margin; else why, with the figures.
  std::string admit(double floor_bps, double admitted_bps) const;

  std::optional<Allotment> allotment(uint32_t id) const;
  // Whether a job's floor gave its reservation back (floor_release_intervals).
  bool floor_released(uint32_t id) const;
  size_t jobs() const { return members_.size(); }

 private:
  struct Member {
    LinkClaim job;
    Apply apply;
    Allotment allot;
    double last_bps = 0;
    double prev_bps = 0;  // the interval before
    int seen = 0;         // intervals observed
    // Its rate over its last two intervals (what a burst averages to).
    double recent_bps() const { return seen >= 2 ? 0.5 * (last_bps + prev_bps) : last_bps; }
    int connections = 0;  // what its tuner asked for at its last interval
    double need_bps = 0;  // an energy ceiling's need (Claim::ceiling_need_bps), smoothed
    int low = 0;  // intervals in a row it moved under cfg.busy of what it was allotted
    int starved = 0;              // intervals in a row it moved under floor_starved_share of its floor
    bool floor_released = false;  // ...enough of them: it is divided as a job of its class
    double least_rtt_ms = 0;      // the least RTT its flows have shown (0: none yet)
    int queued_in_row = 0;        // its intervals in a row whose RTT says the path queues
    bool capped = false;          // it was capped in its last interval...
    bool at_cap = false;          // ...and moved at least cfg.busy of the cap
  };
  void divide();
  // A measured capacity from this round of observations (observe).
  void measure(double sum_bps);
  ArbiterConfig cfg_;
  std::map<uint32_t, Member> members_;
  double measured_bps_ = 0;     // 0: no evidence yet
  std::string measured_why_;    // what it rests on
  size_t since_raise_ = 0;      // observations since the capacity was last doubled
  // The last job to join while others were moving, watched for what it took
  // from them (ArbiterConfig::arrival_share).
  struct Arrival {
    uint32_t id = 0;
    double others_bps = 0;  // what the others moved when it joined (their recent_bps)
    size_t left = 0;        // observations it is still watched for
    int held = 0;           // looks in a row that showed it taking
  };
  std::optional<Arrival> arrival_;
  // Evidence that a newcomer took its rate from the others: "" when none;
  // *sum_bps is then what all moved (recent_bps).
  std::string arrival_evidence(double* sum_bps);
};

}  // namespace xfer
