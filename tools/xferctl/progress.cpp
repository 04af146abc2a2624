#include "progress.h"

#include "xfer/clock.h"
#include "xfer/text.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <fmt/format.h>

namespace xferctl {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) b /= 1000, ++u;
  return u == 0 ? fmt::format("{:.0f} {}", b, units[u]) : fmt::format("{:.1f} {}", b, units[u]);
}

static int term_width() {
  winsize w{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20) return w.ws_col;
  return 80;
}

std::string params_in_words(const std::vector<ChunkKnobs>& chunks) {
  std::string out;
  for (const ChunkKnobs& c : chunks) {
    if (!out.empty()) out += "; ";
    if (chunks.size() > 1) out += c.kind + " ";
    out += fmt::format("cc {}, p {}, pp {}", c.cc, c.p, c.pp);
  }
  return out;
}

std::vector<ChunkKnobs> knobs_from_json(const nlohmann::json& chunks) {
  std::vector<ChunkKnobs> out;
  if (!chunks.is_array()) return out;
  for (const auto& c : chunks)
    out.push_back({c.value("kind", "?"), c.value("cc", 1), c.value("p", 1), c.value("pp", 1)});
  return out;
}

namespace {

std::string eta(double s) {
  if (!(s >= 0) || s > 99 * 3600) return "--:--";
  long t = long(s + 0.5);
  if (t >= 3600) return fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
  return fmt::format("{:02}:{:02}", t / 60, t % 60);
}

}  // namespace

void ProgressBar::draw(const xfer::JobProgress& p, const std::string& params) {
  double now = double(xfer::monotonic_ns()) / 1e9;
  window_.emplace_back(now, p.bytes_done);
  while (window_.size() > 2 && now - window_[1].first >= 2.0) window_.pop_front();
  // The rate over the last two seconds, once half a second has been seen.
  std::optional<double> rate;
  double span = now - window_.front().first;
  if (span >= 0.5 && p.bytes_done >= window_.front().second)
    rate = double(p.bytes_done - window_.front().second) / span;
  double frac = p.bytes_total ? std::min(1.0, double(p.bytes_done) / double(p.bytes_total)) : 0;
  std::string speed = rate ? fmt::format("{:.1f} Mbit/s", *rate * 8 / 1e6) : std::string("-- Mbit/s");
  std::string left = rate && *rate > 0 && p.bytes_total >= p.bytes_done
                         ? eta(double(p.bytes_total - p.bytes_done) / *rate)
                         : eta(-1);
  std::string tail = fmt::format(" {:5.1f}% {}/{} {} ETA {} files {}/{} | {}", frac * 100,
                                 human_bytes(double(p.bytes_done)), human_bytes(double(p.bytes_total)), speed, left,
                                 p.files_done + p.files_skipped, p.files_total, params);
  if (p.state == xfer::JobState::Discovering) tail = " discovering sizes and protocols...";
  int width = term_width() - static_cast<int>(tail.size()) - 3;
  if (width < 10) width = 10;
  if (width > 40) width = 40;
  int fill = static_cast<int>(frac * width);
  std::string bar = "[" + std::string(fill, '#') + std::string(width - fill, '.') + "]";
  fmt::print(stderr, "\r{}{}\x1b[K", bar, tail);
  fflush(stderr);
}

void ProgressBar::finish() {
  fmt::print(stderr, "\r\x1b[K");
  fflush(stderr);
}

void print_result(const nlohmann::json& s, const std::string& title) {
  double secs = s["seconds"].get<double>();
  // Everything here may hold a caller's text (URLs, reasons with names in
  // them, a label): printable() keeps it from acting on the terminal.
  fmt::print("{}: {}{}\n", title, xfer::printable(s["state"].get<std::string>()),
             s.contains("error") ? " — " + xfer::printable(s["error"].get<std::string>()) : "");
  fmt::print("  {:<11} {} ok, {} already there, {} failed (of {})\n", "files", s["files_ok"].get<size_t>(),
             s["files_skipped"].get<size_t>(), s["files_failed"].get<size_t>(), s["files"].get<size_t>());
  fmt::print("  {:<11} {} fetched, {} resumed, {} in the dataset\n", "bytes",
             human_bytes(s["bytes_fetched"].get<double>()), human_bytes(s["bytes_resumed"].get<double>()),
             human_bytes(s["bytes"].get<double>()));
  fmt::print("  {:<11} {:.2f} s\n", "time", secs);
  fmt::print("  {:<11} {:.1f} Mbit/s\n", "throughput", s["throughput_mbps"].get<double>());
  std::string link;
  if (s.contains("link") && s["link"].is_object())
    link = fmt::format(", link {:.0f} Mbit/s {}", s["link"].value("mbps", 0.0),
                       s["link"].value("source", std::string()) == "path" ? "(this path's, measured before)"
                                                                          : "(" + s["link"].value("source", std::string()) + ")");
  fmt::print("  {:<11} {} (RTT {:.3f} ms{}, BDP {})\n", "policy", xfer::printable(s["policy"].get<std::string>()),
             s["rtt_ms"].get<double>(), link, human_bytes(s["bdp_bytes"].get<double>()));
  for (const auto& o : s["origins"])
    fmt::print("  {:<11} {} {}\n", "server", xfer::printable(o["origin"].get<std::string>()), o["protocol"].get<std::string>());
  if (!s["chunks"].empty()) {
    fmt::print("\n  {:<8} {:>7} {:>10} {:>10} {:>4} {:>4} {:>4}\n", "chunk", "files", "bytes", "avg", "cc", "p", "pp");
    for (const auto& c : s["chunks"])
      fmt::print("  {:<8} {:>7} {:>10} {:>10} {:>4} {:>4} {:>4}\n", c["kind"].get<std::string>(),
                 c["files"].get<size_t>(), human_bytes(c["bytes"].get<double>()),
                 human_bytes(c["avg_size"].get<double>()), c["cc"].get<int>(), c["p"].get<int>(), c["pp"].get<int>());
  }
  if (!s["timeline"].empty()) {
    fmt::print("\n  {:>7} {:>12}  params\n", "t (s)", "Mbit/s");
    for (const auto& e : s["timeline"]) {
      std::vector<ChunkKnobs> knobs;
      for (const auto& p : e["params"]) knobs.push_back({p.value("chunk", "?"), p.value("cc", 1), p.value("p", 1), p.value("pp", 1)});
      fmt::print("  {:>7.1f} {:>12.1f}  {}\n", e["t"].get<double>(), e["throughput_mbps"].get<double>(),
                 params_in_words(knobs));
    }
  }
  if (!s["failed"].empty()) {
    fmt::print("\n  failed files:\n");
    for (const auto& f : s["failed"])
      fmt::print("    {}\n      {}\n", xfer::printable(f["url"].get<std::string>()),
                 xfer::printable(f["reason"].get<std::string>()));
  }
}

}  // namespace xferctl
