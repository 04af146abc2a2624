#include "xfer/bw_schedule.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "xfer/text.h"

namespace xfer {

namespace {

constexpr const char* kDays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
constexpr int kWeek = 7 * 1440;

int day_of(const std::string& s) {
  for (int i = 0; i < 7; ++i)
    if (s == kDays[i]) return i;
  return -1;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

BandwidthSchedule BandwidthSchedule::parse(const std::string& text) {
  BandwidthSchedule s;
  if (trim(text).empty()) return s;
  unsigned days = 0x7f;
  std::vector<std::string> items;
  for (size_t b = 0;;) {
    size_t e = text.find(',', b);
    items.push_back(text.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  int n = 0;
  for (std::string item : items) {
    ++n;
    item = trim(item);
    auto bad = [&](const std::string& why) {
      return std::invalid_argument("schedule entry " + std::to_string(n) + " '" + printable(item) + "': " + why);
    };
    std::stringstream words(item);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.size() == 3) {
      size_t dash = w[0].find('-');
      int from = day_of(w[0].substr(0, dash)), to = dash == std::string::npos ? from : day_of(w[0].substr(dash + 1));
      if (from < 0 || to < 0) throw bad("days are a day or a range of days, Mon ... Sun (Mon-Fri, Sat-Sun)");
      days = 0;
      for (int d = from;; d = (d + 1) % 7) {
        days |= 1u << d;
        if (d == to) break;
      }
      w.erase(w.begin());
    }
    if (w.size() != 2) throw bad("write [DAYS] HH:MM RATE, RATE in Mbit/s or off");
    int hh = -1, mm = -1;
    char colon = 0, extra = 0;
    if (std::sscanf(w[0].c_str(), "%d%c%d%c", &hh, &colon, &mm, &extra) != 3 || colon != ':' || hh < 0 || hh > 23 ||
        mm < 0 || mm > 59)
      throw bad("the time is HH:MM, 00:00 to 23:59");
    Entry e;
    e.days = days;
    e.minute = hh * 60 + mm;
    if (w[1] != "off") {
      char* end = nullptr;
      e.mbps = std::strtod(w[1].c_str(), &end);
      if (!end || *end || !std::isfinite(e.mbps) || e.mbps <= 0 || e.mbps > 1e7)
        throw bad("the rate is Mbit/s above 0 (at most 1e7), or off");
    }
    s.entries_.push_back(e);
  }
  return s;
}

std::optional<double> BandwidthSchedule::mbps_at(const std::tm& local) const {
  if (entries_.empty()) return std::nullopt;
  const int now = ((local.tm_wday + 6) % 7) * 1440 + local.tm_hour * 60 + local.tm_min;  // Monday 00:00 = 0
  int best = kWeek + 1;
  double rate = -1;
  for (const Entry& e : entries_)
    for (int d = 0; d < 7; ++d) {
      if (!(e.days & (1u << d))) continue;
      int ago = ((now - (d * 1440 + e.minute)) % kWeek + kWeek) % kWeek;
      if (ago <= best) best = ago, rate = e.mbps;  // a later entry at the same time wins
    }
  if (rate < 0) return std::nullopt;
  return rate;
}

std::optional<double> BandwidthSchedule::mbps_now() const {
  std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  return mbps_at(local);
}

}  // namespace xfer
