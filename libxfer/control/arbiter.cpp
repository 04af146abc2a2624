#include "xfer/arbiter.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "xfer/log.h"
#include "xfer/text.h"

namespace xfer {

namespace {

constexpr JobClass kClasses[] = {JobClass::Foreground, JobClass::High, JobClass::Normal, JobClass::Low,
                                 JobClass::Background};

double mbps(double bps) { return bps / 1e6; }

// Max-min fair shares of total among items of weight w and demand d: an item
// that asks for less than its weighted share gets what it asks for, and the
// rest is shared again among the others.
std::vector<double> waterfill(double total, const std::vector<double>& w, const std::vector<double>& d) {
  std::vector<double> share(w.size(), 0);
  std::vector<bool> done(w.size(), false);
  double left = total;
  for (;;) {
    double weights = 0;
    for (size_t i = 0; i < w.size(); ++i)
      if (!done[i]) weights += w[i];
    if (weights <= 0 || left <= 0) break;
    bool any = false;
    for (size_t i = 0; i < w.size(); ++i)
      if (!done[i] && d[i] <= left * w[i] / weights) share[i] = d[i], done[i] = true, any = true;
    if (!any) {
      for (size_t i = 0; i < w.size(); ++i)
        if (!done[i]) share[i] = left * w[i] / weights;
      break;
    }
    left = total;
    for (size_t i = 0; i < w.size(); ++i)
      if (done[i]) left -= share[i];
  }
  return share;
}

// Whole shares of n units for fractional ones: each share rounded down (at
// least `least`), then the units left to the largest remainders.
std::vector<int> whole_shares(int n, const std::vector<double>& s, int least) {
  std::vector<int> out(s.size());
  int used = 0;
  for (size_t i = 0; i < s.size(); ++i) used += out[i] = std::max(least, int(std::floor(s[i] + 1e-9)));
  std::vector<size_t> order(s.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return s[a] - std::floor(s[a]) > s[b] - std::floor(s[b]); });
  for (size_t k = 0; used < n && k < order.size(); ++k)
    if (double(out[order[k]]) < s[order[k]]) ++out[order[k]], ++used;
  return out;
}

}  // namespace

std::map<uint32_t, std::map<std::string, int>> divide_connections(int limit, const std::vector<Claim>& claims) {
  std::map<uint32_t, std::map<std::string, int>> out;
  if (limit <= 0) return out;
  std::map<std::string, std::vector<const Claim*>> by_origin;
  for (const Claim& c : claims)
    for (const std::string& o : c.job.origins) by_origin[o].push_back(&c);
  for (const auto& [origin, jobs] : by_origin) {
    // A job asks for what its tuner wants and one more; 0: all it can get.
    auto want = [&](const Claim* c) { return c->connections > 0 ? double(c->connections + 1) : double(limit); };
    std::vector<double> share(jobs.size(), 0);
    size_t others = 0;
    for (const Claim* c : jobs) others += c->job.floor_bps <= 0;
    // Floors first: between them what leaves each other job one.
    std::vector<size_t> idx;
    std::vector<double> w, d;
    for (size_t i = 0; i < jobs.size(); ++i)
      if (jobs[i]->job.floor_bps > 0) idx.push_back(i), w.push_back(1), d.push_back(want(jobs[i]));
    double left = double(limit);
    if (!idx.empty()) {
      std::vector<double> s = waterfill(std::max(double(idx.size()), left - double(others)), w, d);
      for (size_t k = 0; k < idx.size(); ++k) share[idx[k]] = s[k], left -= s[k];
    }
    // Then the classes in order, each leaving one to every job of the classes
    // below: users by weight, then their jobs equally.
    size_t below = others;
    for (JobClass cls : kClasses) {
      std::map<uint32_t, std::vector<size_t>> users;
      for (size_t i = 0; i < jobs.size(); ++i)
        if (jobs[i]->job.floor_bps <= 0 && jobs[i]->job.cls == cls) users[jobs[i]->job.user].push_back(i), --below;
      if (users.empty()) continue;
      std::vector<double> uw, ud;
      for (const auto& [u, js] : users) {
        double wt = 0, dm = 0;
        for (size_t i : js) wt = std::max(wt, jobs[i]->job.weight), dm += want(jobs[i]);
        uw.push_back(std::max(wt, 1e-3));
        ud.push_back(dm);
      }
      std::vector<double> us = waterfill(std::max(0.0, left - double(below)), uw, ud);
      size_t ui = 0;
      for (const auto& [u, js] : users) {
        std::vector<double> jd;
        for (size_t i : js) jd.push_back(want(jobs[i]));
        std::vector<double> s = waterfill(us[ui++], std::vector<double>(js.size(), 1.0), jd);
        for (size_t k = 0; k < js.size(); ++k) share[js[k]] = s[k], left -= s[k];
      }
    }
    // What nobody asked for is shared equally, so each can grow into it.
    if (left >= 1)
      for (double& s : share) s += left / double(share.size());
    std::vector<int> whole = whole_shares(limit, share, 1);
    for (size_t i = 0; i < jobs.size(); ++i) out[jobs[i]->job.id][origin] = whole[i];
  }
  return out;
}

const char* to_string(JobClass c) {
  switch (c) {
    case JobClass::Background: return "background";
    case JobClass::Low: return "low";
    case JobClass::Normal: return "normal";
    case JobClass::High: return "high";
    case JobClass::Foreground: return "foreground";
  }
  return "normal";
}

const std::vector<std::string>& job_class_names() {
  static const std::vector<std::string> names = {"foreground", "high", "normal", "low", "background"};
  return names;
}

std::optional<JobClass> job_class_from(const std::string& s) {
  for (JobClass c : kClasses)
    if (s == to_string(c)) return c;
  return std::nullopt;
}

std::map<uint32_t, Allotment> divide_link(double capacity, const std::vector<Claim>& claims, const ArbiterConfig& cfg) {
  std::map<uint32_t, Allotment> out;
  if (capacity <= 0) {
    for (const Claim& c : claims) out[c.job.id] = {0, "the link's capacity is not known (no flow has shown it full): no cap"};
    return out;
  }
  // A limit (the schedule) in force caps a job alone too; the link's own
  // capacity does not (it is a figure, and the link holds itself).
  const bool limited = cfg.limit_bps > 0 && cfg.limit_bps <= capacity * 1.001;
  const std::string whole = limited ? fmt::format("limited by the schedule to {:.0f} Mbit/s", mbps(capacity))
                                    : fmt::format("alone on the link ({:.0f} Mbit/s): no cap", mbps(capacity));
  double aside = 0;
  for (const Claim& c : claims)
    if (c.job.floor_bps > 0) {
      aside += c.job.floor_bps * (1 + cfg.floor_margin);
      out[c.job.id] = {0, fmt::format("floor {:.0f} Mbit/s: never capped", mbps(c.job.floor_bps))};
    }
  double left = std::max(0.0, capacity - aside);
  std::string above = aside > 0 ? fmt::format("{:.0f} Mbit/s set aside for floors", mbps(aside)) : "";
  // Energy ceilings next: what each needs to stay under its ceiling, within
  // what the floors leave.
  std::map<uint32_t, double> need;
  double needs = 0;
  for (const Claim& c : claims)
    if (c.job.floor_bps <= 0 && c.job.ceiling_j_per_gb > 0 && c.ceiling_need_bps > 0)
      needs += need[c.job.id] = c.ceiling_need_bps;
  if (needs > left && needs > 0)
    for (auto& [id, n] : need) n *= left / needs;  // more than there is: in proportion
  if (needs > 0) {
    needs = std::min(needs, left);
    left -= needs;
    above += fmt::format("{}{:.0f} Mbit/s set aside for energy ceilings", above.empty() ? "" : ", ", mbps(needs));
  }
  std::vector<std::pair<uint32_t, double>> finite;  // jobs allotted what they asked for
  for (JobClass cls : kClasses) {
    // The class's users, each with its jobs.
    std::map<uint32_t, std::vector<const Claim*>> users;
    for (const Claim& c : claims)
      if (c.job.floor_bps <= 0 && c.job.cls == cls) users[c.job.user].push_back(&c);
    if (users.empty()) continue;
    std::vector<double> uw, ud;
    for (const auto& [u, jobs] : users) {
      double w = 0, d = 0;
      for (const Claim* c : jobs) w = std::max(w, c->job.weight), d += c->demand_bps;
      uw.push_back(std::max(w, 1e-3));
      ud.push_back(d);
    }
    const double for_class = left;
    std::vector<double> us = waterfill(for_class, uw, ud);
    size_t ui = 0;
    double given = 0;
    for (const auto& [u, jobs] : users) {
      std::vector<double> jw(jobs.size(), 1.0), jd;
      for (const Claim* c : jobs)  // an energy ceiling's need is given already
        jd.push_back(std::max(0.0, c->demand_bps - (need.count(c->job.id) ? need[c->job.id] : 0)));
      std::vector<double> js = waterfill(us[ui], jw, jd);
      for (size_t k = 0; k < jobs.size(); ++k) {
        const Claim& c = *jobs[k];
        given += js[k];
        const double mine = need.count(c.job.id) ? need[c.job.id] : 0;
        const bool under = std::isfinite(c.demand_bps) && js[k] >= jd[k];
        js[k] += mine;
        if (under) finite.push_back({c.job.id, js[k]});
        Allotment& a = out[c.job.id];
        if (js[k] >= capacity * 0.999) {
          a = {limited ? capacity : 0, whole};
          continue;
        }
        a.cap_bps = std::max(cfg.min_bps, js[k]);
        std::string why = under ? fmt::format("moves under its share: {:.1f} Mbit/s, what it moves and a quarter",
                                            mbps(a.cap_bps))
                              : fmt::format("{:.1f} Mbit/s", mbps(a.cap_bps));
        a.reason = fmt::format("{} class, {} of {:.0f} Mbit/s{}{}{}{}", to_string(cls), why, mbps(for_class),
                               above.empty() ? "" : " (" + above + ")",
                               users.size() > 1 ? fmt::format("; {} users share it by weight", users.size()) : "",
                               jobs.size() > 1 ? fmt::format("; {} jobs of its user", jobs.size()) : "",
                               mine > 0 ? fmt::format("; {:.1f} Mbit/s of it to stay under its energy ceiling of "
                                                      "{:.0f} J/GB",
                                                      mbps(mine), c.job.ceiling_j_per_gb)
                                        : "");
      }
      ++ui;
    }
    left = std::max(0.0, left - given);
    above = fmt::format("{:.0f} Mbit/s taken by floors and higher classes", mbps(capacity - left));
  }
  // What nobody asked for goes to the jobs that moved under their shares,
  // equally: no capacity idle, and each can grow into it.
  if (left > 0 && !finite.empty()) {
    double extra = left / double(finite.size());
    for (const auto& [id, share] : finite) {
      Allotment& a = out[id];
      if (a.cap_bps <= 0) continue;
      a.cap_bps = std::max(cfg.min_bps, share + extra);
      if (a.cap_bps >= capacity * 0.999) a = {limited ? capacity : 0, whole};
      else a.reason += fmt::format("; with {:.1f} Mbit/s nobody asked for", mbps(extra));
    }
  }
  return out;
}

Arbiter::Arbiter(ArbiterConfig c) : cfg_(c) {}

double Arbiter::capacity_bps() const {
  // Measured: a tenth above what was seen, so that jobs capped to it can
  // show a faster link.
  double link = cfg_.capacity_bps > 0 ? cfg_.capacity_bps * cfg_.goodput : measured_bps_ * 1.1;
  if (cfg_.limit_bps > 0) return link > 0 ? std::min(link, cfg_.limit_bps) : cfg_.limit_bps;
  return link;
}

std::string Arbiter::capacity_basis() const {
  if (!capacity_measured()) return "";
  return measured_bps_ > 0 ? measured_why_ : "not known: no flow has shown the link full";
}

void Arbiter::measure(double sum_bps) {
  bool queued = false, capped = false, all_at_cap = true;
  for (const auto& [id, m] : members_) {
    queued = queued || m.queued_in_row >= cfg_.queue_intervals;
    if (m.capped) {
      capped = true;
      all_at_cap = all_at_cap && m.at_cap;
    }
  }
  ++since_raise_;
  const std::string took = queued ? "" : arrival_evidence(&sum_bps);
  if (queued || !took.empty()) {
    // The jobs together fill the link: it carries what they move (the most
    // such a round has shown, slowly forgotten so that a slower link is followed).
    const double had = measured_bps_;
    measured_bps_ = std::max(measured_bps_ * 0.995, sum_bps);
    measured_why_ = queued ? fmt::format("{:.0f} Mbit/s moved while the path queued", mbps(measured_bps_))
                           : fmt::format("{:.0f} Mbit/s: {}", mbps(measured_bps_), took);
    if (had <= 0)
      log::info("arbiter: the link is full at {:.0f} Mbit/s ({}): jobs are divided from now on", mbps(measured_bps_),
                queued ? "the jobs' RTT rose above its least" : took);
    since_raise_ = 0;
    return;
  }
  // Every capped job at its cap and no queue: the estimate held them back.
  // It doubles once a round (each job observed once), and the next queue
  // says where the link really is.
  if (measured_bps_ > 0 && capped && all_at_cap && since_raise_ >= members_.size()) {
    measured_bps_ = std::max(2 * measured_bps_, sum_bps);
    measured_why_ = fmt::format("{:.0f} Mbit/s: doubled, the capped jobs at their caps without a queue",
                                mbps(measured_bps_));
    log::info("arbiter: capped jobs move at their caps and no path queues: the link is taken as {:.0f} Mbit/s",
              mbps(measured_bps_));
    since_raise_ = 0;
  }
}

std::string Arbiter::arrival_evidence(double* sum_bps) {
  if (!arrival_) return "";
  auto it = members_.find(arrival_->id);
  if (it == members_.end() || arrival_->left == 0) {
    arrival_.reset();
    return "";
  }
  --arrival_->left;
  double all = 0;
  for (const auto& [id, m] : members_) all += m.recent_bps();
  const double mine = it->second.recent_bps(), before = arrival_->others_bps, others = all - mine;
  const bool took = it->second.seen >= 2 && mine >= cfg_.arrival_share * before && others <= before - 0.5 * mine &&
                    all <= cfg_.arrival_sum_share * before;
  arrival_->held = took ? arrival_->held + 1 : 0;
  if (arrival_->held < cfg_.arrival_confirm) return "";
  *sum_bps = all;
  const std::string why = fmt::format("job {} arrived and took {:.0f} Mbit/s from the others (they moved {:.0f} "
                                      "before it, {:.0f} beside it)",
                                      arrival_->id, mbps(mine), mbps(before), mbps(others));
  arrival_.reset();
  return why;
}

void Arbiter::set_limit(double bps) {
  if (bps == cfg_.limit_bps) return;
  log::info("arbiter: bandwidth schedule: {}", bps > 0 ? fmt::format("{:.0f} Mbit/s", mbps(bps)) : std::string("no limit"));
  // A measured link was seen through the old limit: measured again.
  if (capacity_measured() && (bps <= 0 || bps > cfg_.limit_bps)) measured_bps_ = 0;
  cfg_.limit_bps = bps;
  divide();
}

void Arbiter::set_origin_connections(int n) {
  if (n == cfg_.origin_connections) return;
  log::info("arbiter: connections per origin over all jobs: {}", n > 0 ? std::to_string(n) : std::string("no limit"));
  cfg_.origin_connections = n;
  divide();
}

void Arbiter::set_capacity(double bps) {
  if (bps == cfg_.capacity_bps) return;
  log::info("arbiter: link capacity {}", bps > 0 ? fmt::format("{:.0f} Mbit/s", mbps(bps)) : std::string("measured"));
  cfg_.capacity_bps = bps;
  divide();
}

std::string Arbiter::admit(double floor_bps, double admitted_bps) const {
  if (floor_bps <= 0) return "";
  const double cap = capacity_bps();
  if (cap <= 0) return "";  // nothing known to refuse by (the daemon logs it)
  const double have = admitted_bps * (1 + cfg_.floor_margin);
  const double want = floor_bps * (1 + cfg_.floor_margin);
  if (have + want <= cap) return "";
  return fmt::format("a floor of {:.0f} Mbit/s does not fit: the link is {:.0f} Mbit/s ({}), floors already "
                     "admitted take {:.0f} Mbit/s and each floor sets aside {:.0f}% more than itself",
                     mbps(floor_bps), mbps(cap),
                     capacity_measured() ? std::string("measured")
                                         : fmt::format("{:.0f}% of the configured {:.0f}: the rest is headers",
                                                       cfg_.goodput * 100, mbps(cfg_.capacity_bps)),
                     mbps(have), cfg_.floor_margin * 100);
}

void Arbiter::join(const LinkClaim& j, Apply apply) {
  Member& m = members_[j.id];
  m.job = j;
  m.apply = std::move(apply);
  // What the others moved before it, over two looks each as the taking is
  // judged: a job looked at once moved its first interval, a burst of a
  // server that sends a second's worth at once (46 Mbit/s from a job held
  // to 16 once read as the link), and is no measure to take from.
  double others = 0;
  bool measured = true;
  for (const auto& [id, o] : members_)
    if (id != j.id) others += o.recent_bps(), measured = measured && o.seen >= 2;
  if (others > 0 && measured) arrival_ = Arrival{j.id, others, size_t(cfg_.arrival_rounds) * members_.size()};
  log::info("arbiter: job {} joins: {} class, user {}{}", j.id, to_string(j.cls), j.user,
            j.floor_bps > 0 ? fmt::format(", floor {:.0f} Mbit/s", mbps(j.floor_bps)) : "");
  divide();
}

void Arbiter::leave(uint32_t id) {
  if (!members_.erase(id)) return;
  divide();
}

void Arbiter::observe(uint32_t id, double bps, int connections, double joules_per_gb, double rtt_ms) {
  auto it = members_.find(id);
  if (it == members_.end()) return;
  Member& m = it->second;
  const double had = m.allot.cap_bps > 0 ? m.allot.cap_bps : capacity_bps();
  m.prev_bps = m.last_bps;
  m.last_bps = bps;
  ++m.seen;
  m.connections = connections;
  m.capped = m.allot.cap_bps > 0;
  m.at_cap = m.capped && bps >= cfg_.busy * m.allot.cap_bps;
  bool above = false;
  if (rtt_ms > 0 && bps > 0) {
    above = m.least_rtt_ms > 0 && rtt_ms > m.least_rtt_ms * (1 + cfg_.queue_share) + cfg_.queue_ms;
    m.least_rtt_ms = m.least_rtt_ms > 0 ? std::min(m.least_rtt_ms, rtt_ms) : rtt_ms;
  }
  m.queued_in_row = above ? m.queued_in_row + 1 : 0;
  if (m.job.ceiling_j_per_gb > 0 && joules_per_gb > 0 && bps > 0) {
    // The rate at which its energy per GB would be its ceiling, with the
    // floors' margin; smoothed over intervals (one interval's joules are noisy).
    const double want = bps * joules_per_gb / m.job.ceiling_j_per_gb * (1 + cfg_.floor_margin);
    m.need_bps = m.need_bps > 0 ? 0.5 * m.need_bps + 0.5 * want : want;
  }
  m.low = had > 0 && bps < cfg_.busy * had ? m.low + 1 : 0;
  // A floor is set aside whole while it is used: one whose source cannot
  // carry it (a server that trickles) would hold the link for nothing, and
  // refuse other floors a link that is free.
  if (m.job.floor_bps > 0 && !m.floor_released) {
    m.starved = bps < cfg_.floor_starved_share * m.job.floor_bps ? m.starved + 1 : 0;
    if (m.starved >= cfg_.floor_release_intervals) {
      m.floor_released = true;
      m.allot.reason.clear();  // its next allotment goes to the job whatever it is (it says why)
      log::warn("arbiter: job {} moved {:.2f} Mbit/s, under {:.0f}% of its floor of {:.0f} Mbit/s, {} intervals in a "
                "row: what it fetches from does not carry the floor; the {:.0f} Mbit/s set aside for it go back to "
                "the other jobs, and it shares the link as a job of its class",
                id, mbps(bps), cfg_.floor_starved_share * 100, mbps(m.job.floor_bps), m.starved,
                mbps(m.job.floor_bps * (1 + cfg_.floor_margin)));
    }
  }
  double sum = 0;
  for (const auto& [k, other] : members_) sum += other.last_bps;
  measure(sum);
  divide();
}

bool Arbiter::floor_released(uint32_t id) const {
  auto it = members_.find(id);
  return it != members_.end() && it->second.floor_released;
}

std::optional<Allotment> Arbiter::allotment(uint32_t id) const {
  auto it = members_.find(id);
  if (it == members_.end()) return std::nullopt;
  return it->second.allot;
}

void Arbiter::divide() {
  const double cap = capacity_bps();
  std::vector<Claim> claims;
  for (const auto& [id, m] : members_) {
    Claim c{m.job};
    if (m.floor_released) c.job.floor_bps = 0;
    // A job asks for what it moves and a quarter when it moved well under
    // what it was allotted (its cap, or the whole link when it had none) for
    // several intervals in a row: one slow interval (a ramp, requests that
    // started under an older cap) does not shrink its share. New jobs and
    // busy ones ask for all they can get.
    if (m.low >= cfg_.low_intervals) c.demand_bps = std::max(cfg_.min_bps, m.last_bps * cfg_.demand_slack);
    c.connections = m.connections;
    c.ceiling_need_bps = m.need_bps;
    claims.push_back(c);
  }
  std::map<uint32_t, Allotment> next = divide_link(cap, claims, cfg_);
  // The connections to an origin are limited only where jobs share it.
  std::map<std::string, int> sharing;
  for (const Claim& c : claims)
    for (const std::string& o : c.job.origins) ++sharing[o];
  for (auto& [id, per] : divide_connections(cfg_.origin_connections, claims)) {
    Allotment& a = next[id];
    for (const auto& [origin, n] : per) {
      a.connections[origin] = n;
      if (sharing[origin] > 1)
        a.reason += fmt::format("; {} of {} connections to {} ({} jobs use it)", n, cfg_.origin_connections,
                                shown(origin, 128), sharing[origin]);
    }
  }
  for (auto& [id, m] : members_) {
    Allotment& a = next[id];
    if (m.floor_released)
      a.reason = fmt::format("floor {:.0f} Mbit/s released: its source did not carry it; {}", mbps(m.job.floor_bps), a.reason);
    const bool moved = (a.cap_bps > 0) != (m.allot.cap_bps > 0) || a.connections != m.allot.connections ||
                       std::abs(a.cap_bps - m.allot.cap_bps) > 0.05 * std::max(a.cap_bps, m.allot.cap_bps);
    const bool first = m.allot.reason.empty();
    m.allot.reason = a.reason;
    if (!moved && !first) continue;
    m.allot = a;
    log::info("arbiter: job {}: {} ({})", id, a.cap_bps > 0 ? fmt::format("cap {:.1f} Mbit/s", mbps(a.cap_bps)) : "no cap",
              a.reason);
    if (m.apply) m.apply(a);
  }
}

}  // namespace xfer
