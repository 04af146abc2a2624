// Who runs next on a node, as plain rules over what each unfinished job is
// now (issues 39 and 53): the queue, the slots, the yields and the floor
// ledger. xferd keeps the jobs (and says what each one is, as a Seat); this
// decides, and is tested without a bus.
//
//   slots     at most max_running jobs hold one (running, or their files
//             being opened as their owner)
//   queue     the next job is the oldest queued one of the user holding the
//             fewest slots, among those that fit: under max_running_entries
//             (alone, any job runs) and, for a floor, beside the floors held
//   yield     a user waiting with fewer than a fair share of the slots (the
//             slots over the users who want one) takes one from the user
//             holding the most above that share: that user's newest running
//             job goes back to the queue
//   floors    what is set aside: the floors of the jobs seated and not
//             paused, less those the arbiter released
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace xfer {

struct SlotLimits {
  size_t max_running = 4;
  size_t max_running_entries = 0;  // 0: no bound
};

// One unfinished job as the queue sees it.
struct Seat {
  uint64_t id = 0;
  uint32_t uid = 0;
  uint64_t seq = 0;          // queue order (set at submit and at each return to the queue)
  bool queued = false;       // waits in the queue: nothing of it started
  bool seated = false;       // holds a slot
  bool running = false;      // seated and moving bytes (not starting, not paused): one that may yield
  bool started = false;      // its Job exists: its entries count against max_running_entries
  bool floor_held = false;   // its floor is set aside now (seated, not paused, not released)
  bool waits_for_room = false;  // queued with a reason besides a slot (room, a floor)
  size_t entries = 0;
  double floor_bps = 0;
};

// The floors set aside, bits/s.
double floors_held(const std::vector<Seat>& seats);
size_t seats_taken(const std::vector<Seat>& seats);
// Every slot is held and a job waits for one alone.
bool slot_wanted(const std::vector<Seat>& seats, const SlotLimits& l);

// Whether a floor fits beside the floors held (the arbiter's admit): "" or why not.
using AdmitFloor = std::function<std::string(double floor_bps, double held_bps)>;

struct NextPick {
  std::optional<uint64_t> start;          // the job to start now (none: no slot, or nothing fits)
  std::map<uint64_t, std::string> waits;  // each queued job looked at: why it waits ("": it fits)
  std::map<uint64_t, bool> for_floor;     // of those, the ones whose reason is their floor
};
NextPick next_to_start(const std::vector<Seat>& seats, const SlotLimits& l, const AdmitFloor& admit);

struct YieldPick {
  uint64_t id = 0;  // the job to go back to the queue
  uint32_t uid = 0;
  size_t holds = 0, fair = 0, users_waiting = 0;
};
// The job that gives its slot to a waiting user, when one should (see above).
std::optional<YieldPick> who_yields(const std::vector<Seat>& seats, const SlotLimits& l);

}  // namespace xfer
