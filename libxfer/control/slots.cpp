#include "xfer/slots.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace xfer {

double floors_held(const std::vector<Seat>& seats) {
  double f = 0;
  for (const Seat& s : seats)
    if (s.floor_held) f += s.floor_bps;
  return f;
}

size_t seats_taken(const std::vector<Seat>& seats) {
  return size_t(std::count_if(seats.begin(), seats.end(), [](const Seat& s) { return s.seated; }));
}

bool slot_wanted(const std::vector<Seat>& seats, const SlotLimits& l) {
  if (seats_taken(seats) < l.max_running) return false;
  return std::any_of(seats.begin(), seats.end(), [](const Seat& s) { return s.queued && !s.waits_for_room; });
}

namespace {

std::map<uint32_t, size_t> held_by_user(const std::vector<Seat>& seats) {
  std::map<uint32_t, size_t> n;
  for (const Seat& s : seats)
    if (s.seated) ++n[s.uid];
  return n;
}

}  // namespace

NextPick next_to_start(const std::vector<Seat>& seats, const SlotLimits& l, const AdmitFloor& admit) {
  NextPick out;
  if (seats_taken(seats) >= l.max_running) return out;
  size_t entries = 0;
  for (const Seat& s : seats)
    if (s.started) entries += s.entries;
  std::map<uint32_t, size_t> held = held_by_user(seats);
  std::vector<const Seat*> queue;
  for (const Seat& s : seats)
    if (s.queued) queue.push_back(&s);
  std::stable_sort(queue.begin(), queue.end(), [](const Seat* a, const Seat* b) { return a->seq < b->seq; });
  const double floors = floors_held(seats);
  const Seat* next = nullptr;
  for (const Seat* s : queue) {
    // Memory grows with the entries of the running jobs: a job waits until
    // it fits (alone, any job runs).
    if (l.max_running_entries > 0 && entries > 0 && entries + s->entries > l.max_running_entries) {
      out.waits[s->id] = fmt::format("room under limits.max_running_entries ({} entries running)", entries);
      continue;
    }
    if (s->floor_bps > 0) {
      if (std::string why = admit(s->floor_bps, floors); !why.empty()) {
        out.waits[s->id] = why;
        out.for_floor[s->id] = true;
        continue;
      }
    }
    out.waits[s->id] = "";
    if (!next || held[s->uid] < held[next->uid]) next = s;
  }
  if (next) out.start = next->id;
  return out;
}

std::optional<YieldPick> who_yields(const std::vector<Seat>& seats, const SlotLimits& l) {
  if (seats_taken(seats) < l.max_running) return std::nullopt;
  std::map<uint32_t, size_t> held = held_by_user(seats);
  std::set<uint32_t> waiting;
  for (const Seat& s : seats)
    if (s.queued && !s.waits_for_room) waiting.insert(s.uid);
  std::set<uint32_t> users = waiting;
  for (const auto& [u, n] : held) users.insert(u);
  if (waiting.empty() || users.size() < 2) return std::nullopt;
  const size_t fair = (l.max_running + users.size() - 1) / users.size();
  bool starved = false;
  for (uint32_t u : waiting) starved = starved || held[u] < fair;
  if (!starved) return std::nullopt;
  uint32_t most = 0;
  size_t top = 0;
  for (const auto& [u, n] : held)
    if (n > top) most = u, top = n;
  if (top <= fair) return std::nullopt;
  const Seat* newest = nullptr;
  for (const Seat& s : seats)
    if (s.uid == most && s.running && (!newest || s.seq > newest->seq)) newest = &s;
  if (!newest) return std::nullopt;
  return YieldPick{newest->id, most, top, fair, waiting.size()};
}

}  // namespace xfer
