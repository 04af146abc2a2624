// A bandwidth timetable for the link, as rclone's --bwlimit timetable and
// Windows BITS's hour windows have it: xferd.conf's [network] schedule, e.g.
//
//   "Mon-Fri 08:00 200, Mon-Fri 18:00 off, Sat-Sun 00:00 500"
//
// Each entry is [DAYS] HH:MM RATE: from that time on those days the link's
// capacity for xferd is RATE Mbit/s ("off": no limit), until the next entry
// takes over (the week wraps). DAYS is a day (Mon ... Sun) or a range
// (Mon-Fri, Sat-Sun, Fri-Mon); an entry without days has the previous
// entry's, the first one every day. The arbiter applies the rate in force as
// the capacity it divides (xfer/arbiter.h).
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace xfer {

class BandwidthSchedule {
 public:
  struct Entry {
    unsigned days = 0x7f;  // bit 0 Monday ... bit 6 Sunday
    int minute = 0;        // of the day
    double mbps = -1;      // < 0: off (no limit)
  };
  // Throws std::invalid_argument naming the entry and what is wrong with it.
  static BandwidthSchedule parse(const std::string& text);
  bool empty() const { return entries_.empty(); }
  // The rate in force at this local time (Mbit/s); nullopt: no limit.
  std::optional<double> mbps_at(const std::tm& local) const;
  // The same for now, in the machine's local time.
  std::optional<double> mbps_now() const;
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

}  // namespace xfer
