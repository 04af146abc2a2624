// libxfer/control/bw_schedule.cpp: the bandwidth timetable.
#include "xfer/bw_schedule.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

// wday: 0 Sunday ... 6 Saturday, as struct tm has it.
std::tm at(int wday, int hour, int minute) {
  std::tm t{};
  t.tm_wday = wday, t.tm_hour = hour, t.tm_min = minute;
  return t;
}

std::string refusal(const std::string& text) {
  try {
    xfer::BandwidthSchedule::parse(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(BandwidthSchedule, TheEntryInForceIsTheLastOneBeforeNowAndTheWeekWraps) {
  auto s = xfer::BandwidthSchedule::parse("Mon-Fri 08:00 200, 18:00 off, Sat-Sun 10:00 500");
  ASSERT_EQ(s.entries().size(), 3u);
  EXPECT_EQ(s.entries()[1].days, s.entries()[0].days);  // no days: the previous entry's
  EXPECT_EQ(s.mbps_at(at(1, 9, 0)), 200.0);              // Monday 09:00
  EXPECT_EQ(s.mbps_at(at(3, 7, 59)), std::nullopt);      // Wednesday before 08:00: Tuesday 18:00's off
  EXPECT_EQ(s.mbps_at(at(5, 17, 59)), 200.0);            // Friday
  EXPECT_EQ(s.mbps_at(at(6, 9, 0)), std::nullopt);       // Saturday 09:00: Friday 18:00's off
  EXPECT_EQ(s.mbps_at(at(0, 23, 0)), 500.0);             // Sunday night
  EXPECT_EQ(s.mbps_at(at(1, 7, 0)), 500.0);              // Monday 07:00: Sunday 10:00's, across the week's end
  // Every day from one entry; an empty schedule limits nothing.
  EXPECT_EQ(xfer::BandwidthSchedule::parse("00:00 50").mbps_at(at(4, 12, 0)), 50.0);
  EXPECT_TRUE(xfer::BandwidthSchedule::parse("").empty());
  EXPECT_EQ(xfer::BandwidthSchedule::parse("  ").mbps_at(at(4, 12, 0)), std::nullopt);
  // A range that wraps: Fri-Mon.
  auto w = xfer::BandwidthSchedule::parse("Fri-Mon 00:00 10, Tue-Thu 00:00 20");
  EXPECT_EQ(w.mbps_at(at(0, 12, 0)), 10.0);
  EXPECT_EQ(w.mbps_at(at(3, 12, 0)), 20.0);
}

TEST(BandwidthSchedule, AMalformedEntryIsNamedWithWhatIsWrong) {
  EXPECT_EQ(refusal("Mon-Fri 25:00 200"), "schedule entry 1 'Mon-Fri 25:00 200': the time is HH:MM, 00:00 to 23:59");
  EXPECT_EQ(refusal("08:00 200, Someday 09:00 1"),
            "schedule entry 2 'Someday 09:00 1': days are a day or a range of days, Mon ... Sun (Mon-Fri, Sat-Sun)");
  EXPECT_EQ(refusal("08:00 -5"), "schedule entry 1 '08:00 -5': the rate is Mbit/s above 0 (at most 1e7), or off");
  EXPECT_EQ(refusal("08:00 fast"), "schedule entry 1 '08:00 fast': the rate is Mbit/s above 0 (at most 1e7), or off");
  EXPECT_EQ(refusal("200"), "schedule entry 1 '200': write [DAYS] HH:MM RATE, RATE in Mbit/s or off");
  EXPECT_EQ(refusal("08:00 200,"), "schedule entry 2 '': write [DAYS] HH:MM RATE, RATE in Mbit/s or off");
}
