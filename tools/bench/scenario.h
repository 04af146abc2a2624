// A benchmark scenario (TOML, tests/bench/*.toml): the link, the datasets and
// the clients to compare.
#pragma once

#include <cstdint>
#include <string>
#include <toml++/toml.h>
#include <vector>

namespace bench {

struct LinkSpec {
  double rate_mbps = 1000, rtt_ms = 0, loss_pct = 0, jitter_ms = 0;
  uint64_t queue_bytes = 0;      // 0: one BDP
  int mtu = 1500;
  uint64_t client_rmem_max = 0;  // 0: the kernel default
  // No emulated link: client and server share one namespace and talk over
  // its loopback (what the machine's own cost per byte is measured on).
  // rate_mbps is then only what xferctl is told (--bandwidth-mbps).
  bool loopback = false;
};

struct CrossSpec {
  double start_s = 0, stop_s = 0, pct = 0;
};

struct DatasetSpec {
  std::string shape;
  double scale = 1, quick_scale = 0, size_scale = 1, quick_size_scale = 0;
  uint64_t seed = 1;
};

struct ClientSpec {
  std::string name, kind;  // kind: xferctl | curl-seq | curl-parallel | wget | aria2c
  // h1 | h2c (only xferctl and curl speak h2c) | https (TLS from the bench's
  // CA, which every client is given; h2 by ALPN where the client has it)
  std::string port = "h1";
  int parallel = 16, split = 4;
  std::vector<std::string> args;
  // [learning]: the clients marked rotate take turns, one per round (the
  // everyday traffic under mixed policies); the others run every round.
  bool rotate = false;
  // xferctl: the binary to run (default: the xferctl beside xfer-bench), so
  // that two builds of the engine run in the same bench run (A/B).
  std::string program;
  // What the SLA report checks this client for: max-throughput, min-energy,
  // energy-efficient, ee-sweep (one fixed level of the brute-force sweep),
  // target (throughput-target), floor (an absolute target judged as a
  // floor: job average and each interval after the first two within
  // [1.0, 1.15] of it); the history benchmark's (issue 15):
  // hla-throughput, hla-energy, static (one point of the static sweep);
  // empty: nothing.
  std::string goal;
  bool is_peer() const { return kind != "xferctl"; }
};

// The history phase (issue 15): xfer-hla collect on a plan (datasets of
// the same shapes, other seeds), then analyze; clients' "{hla_table}"
// arguments name the table it made.
struct HlaPhase {
  std::string plan;  // resolved against the scenario's directory; empty: no phase
};

// A learning-curve scenario (issue 41): a new path and an empty history;
// `rounds` rounds of everyday jobs, each xferctl client writing the history
// ("{history}" in its args) and the table analysed again after each round
// ("{hla_table}": absent before the first analysis, so the hla clients of
// round 1 start cold). --repeat runs the whole curve again from an empty
// history.
struct LearningSpec {
  int rounds = 0;  // 0: not a learning scenario
};

// A job of a contention scenario ([[job]]): many jobs run together in one
// process on one arbiter, as xferd runs them (xfer/job_set.h), instead of
// clients one after another.
struct SetJobSpec {
  std::string name, algorithm, cls = "normal";
  // What the report checks it for: floor (target_mbps held), bulk (moves
  // what the floors leave it), background (takes the idle link, yields),
  // equal (its user's share against the other "equal" users'); "": nothing.
  std::string goal;
  uint32_t user = 1000;
  double start_s = 0, target_mbps = 0;
  size_t dataset = 0;  // index into the scenario's [[dataset]]s
};

struct Scenario {
  std::string name, path;
  std::vector<SetJobSpec> jobs;
  LinkSpec link;
  HlaPhase hla;
  LearningSpec learning;
  std::vector<CrossSpec> cross;
  std::vector<DatasetSpec> datasets;
  std::vector<ClientSpec> clients;
};

// Throws std::runtime_error with file, line and reason.
Scenario load_scenario(const std::string& path);

// The pieces, for other plans made of links and datasets (xfer-hla collect).
toml::table parse_toml(const std::string& path);
LinkSpec parse_link(const toml::table& link, const std::string& path);
std::vector<DatasetSpec> parse_datasets(const toml::table& root, const std::string& path);

}  // namespace bench
