// control/slots: who runs next on a node: the queue, the slots, the yields
// and the floor ledger, without a bus (xferd's Service asks them; its
// ManyJobs.* and Daemon.* tests check the same through D-Bus).
#include "xfer/slots.h"

#include <gtest/gtest.h>

using xfer::Seat;
using xfer::SlotLimits;

namespace {

Seat queued(uint64_t id, uint32_t uid, uint64_t seq, size_t entries = 1, double floor_bps = 0) {
  Seat s;
  s.id = id, s.uid = uid, s.seq = seq, s.queued = true, s.entries = entries, s.floor_bps = floor_bps;
  return s;
}

Seat running(uint64_t id, uint32_t uid, uint64_t seq, size_t entries = 1, double floor_bps = 0) {
  Seat s;
  s.id = id, s.uid = uid, s.seq = seq, s.seated = s.running = s.started = true, s.entries = entries;
  s.floor_bps = floor_bps, s.floor_held = floor_bps > 0;
  return s;
}

const xfer::AdmitFloor kAnyFloor = [](double, double) { return std::string(); };

}  // namespace

TEST(Slots, TheOldestJobOfTheUserHoldingFewestSlotsStartsNext) {
  SlotLimits l{4, 0};
  // uid 1 holds two slots, uid 2 one: uid 2's oldest goes first, though uid 1's is older.
  std::vector<Seat> s = {running(1, 1, 1), running(2, 1, 2), running(3, 2, 3), queued(4, 1, 4), queued(5, 2, 6),
                         queued(6, 2, 5)};
  xfer::NextPick p = xfer::next_to_start(s, l, kAnyFloor);
  ASSERT_TRUE(p.start);
  EXPECT_EQ(*p.start, 6u);
  EXPECT_EQ(p.waits.at(4), "") << "it fits: only its turn is later";
  // Every slot held: none starts.
  s.push_back(running(7, 2, 7));
  p = xfer::next_to_start(s, l, kAnyFloor);
  EXPECT_FALSE(p.start) << "every slot held";
  // One leaves: uid 1 now holds fewer (1 against 2), its job goes.
  s.erase(s.begin());
  p = xfer::next_to_start(s, l, kAnyFloor);
  ASSERT_TRUE(p.start);
  EXPECT_EQ(*p.start, 4u);
  // Users level: the oldest of all.
  p = xfer::next_to_start({running(1, 1, 1), running(2, 2, 2), queued(3, 2, 4), queued(4, 1, 5)}, l, kAnyFloor);
  ASSERT_TRUE(p.start);
  EXPECT_EQ(*p.start, 3u);
}

TEST(Slots, AJobWaitsForRoomUnderTheEntriesBoundButAnyJobRunsAlone) {
  SlotLimits l{4, 100};
  std::vector<Seat> s = {running(1, 1, 1, 60), queued(2, 2, 2, 50), queued(3, 2, 3, 40)};
  xfer::NextPick p = xfer::next_to_start(s, l, kAnyFloor);
  ASSERT_TRUE(p.start);
  EXPECT_EQ(*p.start, 3u) << "the one that fits, though younger";
  EXPECT_EQ(p.waits.at(2), "room under limits.max_running_entries (60 entries running)");
  EXPECT_FALSE(p.for_floor.count(2));
  // Alone, a job larger than the bound runs.
  p = xfer::next_to_start({queued(9, 1, 1, 500)}, l, kAnyFloor);
  ASSERT_TRUE(p.start);
  EXPECT_EQ(*p.start, 9u);
  // A job whose files are being opened holds a slot but has no entries yet.
  Seat opening = queued(5, 1, 1, 80);
  opening.queued = false, opening.seated = true;
  p = xfer::next_to_start({opening, queued(6, 1, 2, 80)}, l, kAnyFloor);
  ASSERT_TRUE(p.start);
  EXPECT_EQ(*p.start, 6u);
}

TEST(Slots, AFloorWaitsUntilItFitsBesideTheFloorsHeld) {
  SlotLimits l{4, 0};
  std::vector<Seat> s = {running(1, 1, 1, 1, 60e6), queued(2, 2, 2, 1, 50e6), queued(3, 2, 3)};
  double asked = 0, held = 0;
  xfer::AdmitFloor link100 = [&](double floor, double h) {
    asked = floor, held = h;
    return floor + h > 100e6 ? std::string("does not fit") : std::string();
  };
  xfer::NextPick p = xfer::next_to_start(s, l, link100);
  EXPECT_EQ(asked, 50e6);
  EXPECT_EQ(held, 60e6);
  EXPECT_EQ(p.waits.at(2), "does not fit");
  EXPECT_TRUE(p.for_floor.at(2));
  ASSERT_TRUE(p.start);
  EXPECT_EQ(*p.start, 3u);
  // Released by the arbiter (its source did not carry it), or paused: not held.
  s[0].floor_held = false;
  EXPECT_EQ(xfer::floors_held(s), 0);
  p = xfer::next_to_start(s, l, link100);
  EXPECT_EQ(p.waits.at(2), "");
  EXPECT_EQ(*p.start, 2u);
}

TEST(Slots, AUserAboveAFairShareGivesItsNewestRunningJobToAWaitingUser) {
  SlotLimits l{4, 0};
  std::vector<Seat> s = {running(1, 1, 1), running(2, 1, 2), running(3, 1, 4), running(4, 1, 3), queued(5, 2, 5)};
  EXPECT_TRUE(xfer::slot_wanted(s, l));
  std::optional<xfer::YieldPick> y = xfer::who_yields(s, l);
  ASSERT_TRUE(y);
  EXPECT_EQ(y->id, 3u) << "the newest in queue order";
  EXPECT_EQ(y->uid, 1u);
  EXPECT_EQ(y->holds, 4u);
  EXPECT_EQ(y->fair, 2u);
  EXPECT_EQ(y->users_waiting, 1u);
  // A job starting (not yet running) is not the one that goes.
  s[2].running = false;
  EXPECT_EQ(xfer::who_yields(s, l)->id, 4u);
  // A waiting job that waits for room, not for a slot, takes none.
  s[4].waits_for_room = true;
  EXPECT_FALSE(xfer::who_yields(s, l));
  EXPECT_FALSE(xfer::slot_wanted(s, l));
  // At its fair share a user keeps its slots.
  std::vector<Seat> fair = {running(1, 1, 1), running(2, 1, 2), running(3, 2, 3), running(4, 2, 4), queued(5, 2, 5)};
  EXPECT_FALSE(xfer::who_yields(fair, l));
  // One user alone: nobody to yield to.
  std::vector<Seat> alone = {running(1, 1, 1), running(2, 1, 2), running(3, 1, 3), running(4, 1, 4), queued(5, 1, 5)};
  EXPECT_FALSE(xfer::who_yields(alone, l));
  EXPECT_TRUE(xfer::slot_wanted(alone, l));
}
