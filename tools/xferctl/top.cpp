#include "top.h"

#include <curses.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <iostream>
#include <map>

#include "bus_client.h"
#include "xfer/text.h"

namespace xferctl {

namespace {

std::string fit(const std::string& s, size_t w) {
  if (s.size() <= w) return s + std::string(w - s.size(), ' ');
  return w ? s.substr(0, w - 1) + "~" : "";
}
std::string fit_right(const std::string& s, size_t w) { return s.size() >= w ? s.substr(0, w) : std::string(w - s.size(), ' ') + s; }

std::string eta(const TopJob& j) {
  if (j.rate_bps <= 0 || j.total <= j.done) return "-";
  double s = double(j.total - j.done) * 8 / j.rate_bps;
  if (s >= 99 * 3600) return ">99h";
  if (s >= 3600) return fmt::format("{}h{:02}m", int(s / 3600), int(std::fmod(s, 3600) / 60));
  if (s >= 60) return fmt::format("{}m{:02}s", int(s / 60), int(std::fmod(s, 60)));
  return fmt::format("{}s", int(std::ceil(s)));
}

std::string energy(double j) {
  if (j <= 0) return "-";
  if (j >= 1e6) return fmt::format("{:.1f}MJ", j / 1e6);
  if (j >= 1e4) return fmt::format("{:.1f}kJ", j / 1e3);
  return fmt::format("{:.0f}J", j);
}

const char* short_class(const std::string& c) {
  if (c == "foreground") return "fgnd";
  if (c == "background") return "bgnd";
  if (c == "normal") return "norm";
  return c.c_str();
}

const char* short_state(const std::string& s) {
  if (s == "needs-credentials") return "needcrd";
  if (s == "discovering") return "discovr";
  return s.c_str();
}

std::string user_name(uint32_t uid) {
  if (passwd* pw = getpwuid(uid)) return xfer::printable(pw->pw_name);
  return std::to_string(uid);
}

// One refresh: ListJobs, then each unfinished job's properties, and the machine's.
TopSnapshot read_snapshot(Bus& bus, std::map<uint32_t, std::string>& users) {
  TopSnapshot s;
  nlohmann::json m = properties(bus, kManager, kManagerIface);
  s.version = xfer::printable(m.value("Version", ""));
  s.cpus = m.value("OnlineCpus", 0u);
  s.freq_khz = m.value("CpuFrequencyKHz", uint64_t(0));
  s.link_bps = m.value("LinkCapacityBps", 0.0);
  for (const ListRow& r : list_jobs(bus)) {
    if (r.state == "done" || r.state == "failed" || r.state == "cancelled") continue;
    nlohmann::json p;
    try {
      p = job_properties(bus, r.path);
    } catch (const ClientError&) {
      continue;  // it ended (and was forgotten) between the two calls
    }
    TopJob j;
    j.id = r.id, j.uid = r.uid;
    if (!users.count(r.uid)) users[r.uid] = user_name(r.uid);
    j.user = users[r.uid];
    j.policy = r.shown_policy, j.label = r.shown_label;
    j.state = xfer::printable(p.value("State", r.state));
    j.cls = xfer::printable(p.value("Class", ""));
    j.sla = xfer::printable(p.value("Sla", ""));
    j.promise = xfer::printable(p.value("SlaPromise", ""));
    j.sla_met = p.value("SlaIntervalsMet", 0u), j.sla_missed = p.value("SlaIntervalsMissed", 0u);
    j.rate_bps = j.state == "running" ? p.value("ThroughputBps", 0.0) : 0;
    j.joules = p.value("EnergyJoules", 0.0);
    j.done = p.value("BytesDone", uint64_t(0)), j.total = p.value("BytesTotal", uint64_t(0));
    if (s.energy_source.empty()) s.energy_source = xfer::printable(p.value("EnergySource", ""));
    s.jobs.push_back(j);
  }
  std::stable_sort(s.jobs.begin(), s.jobs.end(), [](const TopJob& a, const TopJob& b) {
    if (a.rate_bps != b.rate_bps) return a.rate_bps > b.rate_bps;
    return a.id < b.id;
  });
  return s;
}

volatile sig_atomic_t g_stop = 0;

}  // namespace

std::vector<std::string> top_lines(const TopSnapshot& s, int width, bool show_user) {
  const size_t w = size_t(std::max(width, 40));
  std::vector<std::string> out;
  auto line = [&](const std::string& l) { out.push_back(l.substr(0, w)); };
  size_t running = 0, queued = 0, other = 0, met = 0, missed = 0;
  double total_bps = 0;
  for (const TopJob& j : s.jobs) {
    if (j.state == "running" || j.state == "discovering") ++running;
    else if (j.state == "queued") ++queued;
    else ++other;
    if (j.sla == "met") ++met;
    if (j.sla == "missed") ++missed;
    total_bps += j.rate_bps;
  }
  line(fmt::format("xferd {}  jobs: {} running, {} queued, {} paused/waiting", s.version, running, queued, other));
  line(fmt::format("CPUs {}  freq {}  link {}  moving {:.1f} Mbit/s{}", s.cpus,
                   s.freq_khz ? fmt::format("{:.0f} MHz", double(s.freq_khz) / 1e3) : std::string("-"),
                   s.link_bps > 0 ? fmt::format("{:.1f} Mbit/s", s.link_bps / 1e6) : std::string("not measured yet"),
                   total_bps / 1e6, s.link_bps > 0 ? fmt::format(" ({:.0f}%)", 100 * total_bps / s.link_bps) : ""));
  line(fmt::format("SLA: {} met, {} missed  energy: {}", met, missed, s.energy_source.empty() ? "-" : s.energy_source));
  if (!s.error.empty()) line("! " + s.error);
  line("");
  std::string head = fit_right("ID", 5) + " " + (show_user ? fit("USER", 7) + " " : "") + fit("POLICY", 9) + " " +
                     fit("CLASS", 5) + " " + fit("STATE", 7) + " " + fit_right("MBIT/S", 6) + " " + fit_right("SHARE", 5) +
                     " " + fit("SLA", 6) + " " + fit_right("ETA", 6) + " " + fit_right("ENERGY", 6) + " ";
  line(head + fit("LABEL", w > head.size() ? w - head.size() : 0));
  for (const TopJob& j : s.jobs) {
    double share = s.link_bps > 0 ? j.rate_bps / s.link_bps : total_bps > 0 ? j.rate_bps / total_bps : 0;
    std::string sla = j.sla == "met" ? "met" : j.sla == "missed" ? "MISSED" : j.promise.empty() ? "" : "-";
    std::string l = fit_right(std::to_string(j.id), 5) + " " + (show_user ? fit(j.user, 7) + " " : "") +
                    fit(j.policy, 9) + " " + fit(short_class(j.cls), 5) + " " + fit(short_state(j.state), 7) + " " +
                    fit_right(j.state == "running" ? fmt::format("{:.1f}", j.rate_bps / 1e6) : "-", 6) + " " +
                    fit_right(j.state == "running" ? fmt::format("{:.0f}%", 100 * share) : "-", 5) + " " + fit(sla, 6) +
                    " " + fit_right(eta(j), 6) + " " + fit_right(energy(j.joules), 6) + " ";
    line(l + (w > l.size() ? fit(j.label, w - l.size()) : ""));
  }
  if (s.jobs.empty() && s.error.empty()) line("  (no unfinished jobs" + std::string(show_user ? ")" : " of yours)"));
  return out;
}

int top(double delay_s, bool once) {
  const bool root = geteuid() == 0;
  std::map<uint32_t, std::string> users;
  if (once) {
    Bus bus;
    TopSnapshot s = read_snapshot(bus, users);
    const char* cols = getenv("COLUMNS");
    for (const std::string& l : top_lines(s, cols ? std::max(40, atoi(cols)) : 80, root)) std::cout << l << "\n";
    return kOk;
  }
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
    throw ClientError("xferctl top draws on a terminal; use --once for one screen as text", kUsage);
  std::unique_ptr<Bus> bus;
  signal(SIGINT, [](int) { g_stop = 1; });
  signal(SIGTERM, [](int) { g_stop = 1; });
  initscr();
  cbreak();
  noecho();
  curs_set(0);
  keypad(stdscr, TRUE);
  timeout(int(delay_s * 1000));
  while (!g_stop) {
    TopSnapshot s;
    try {
      if (!bus) bus = std::make_unique<Bus>();
      s = read_snapshot(*bus, users);
    } catch (const ClientError& e) {
      s.error = xfer::printable(e.what());
      bus.reset();  // connect again at the next refresh
    }
    std::vector<std::string> lines = top_lines(s, COLS, root);
    erase();
    for (int i = 0; i < int(lines.size()) && i < LINES - 1; ++i) {
      bool header = lines[i].compare(0, 7, "   ID  ") == 0 || lines[i].rfind("   ID ", 0) == 0;
      if (header) attron(A_REVERSE);
      mvaddnstr(i, 0, lines[i].c_str(), COLS);
      if (header) attroff(A_REVERSE);
    }
    mvaddnstr(LINES - 1, 0, "q: quit", COLS);
    refresh();
    int ch = getch();  // waits up to the delay
    if (ch == 'q' || ch == 'Q') break;
  }
  endwin();
  return kOk;
}

}  // namespace xferctl
