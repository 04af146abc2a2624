// xferctl top: a live view of every job the caller may see (root: all), read
// as htop and iotop are: the machine on top (CPUs, frequency, the link and
// what the jobs move on it), then a line per unfinished job, fastest first:
// rate, share of the link, class, state, SLA met or missed, ETA, energy.
// Redrawn every second (--delay); q quits. Fits 80 columns (over ssh); the
// label takes what a wider terminal leaves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xferctl {

// What one refresh read from xferd.
struct TopJob {
  uint64_t id = 0;
  uint32_t uid = 0;
  std::string user, policy, cls, state, sla, promise, label;
  double rate_bps = 0, joules = 0;
  uint64_t done = 0, total = 0;
  uint32_t sla_met = 0, sla_missed = 0;
};
struct TopSnapshot {
  std::string version, energy_source, error;  // error: why nothing could be read (xferd gone...)
  uint32_t cpus = 0;
  uint64_t freq_khz = 0;
  double link_bps = 0;
  std::vector<TopJob> jobs;  // unfinished only
};

// The screen's lines for a terminal width (every line at most width
// columns; caller text already escaped). Unit-tested without a terminal.
std::vector<std::string> top_lines(const TopSnapshot& s, int width, bool show_user);

// The command: a full-screen view until q (or SIGINT); once: one screen
// printed as text (scripts, a pipe).
int top(double delay_s, bool once);

}  // namespace xferctl
