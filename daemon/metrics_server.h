// Where the metrics go (metrics.h): an HTTP endpoint that exists only when
// configured ([metrics] listen) or when systemd hands xferd a socket
// (xferd-metrics.socket), and a file for node_exporter's textfile collector
// ([metrics] textfile). The page is built when a scrape asks for it: nothing
// is computed while nobody scrapes.
//
// The endpoint speaks just enough HTTP/1.x for a scraper: GET or HEAD of
// /metrics, one request per connection, a bounded request (8 KiB); anything
// else gets its 4xx. Any local user can connect, so a connection cannot hold
// the endpoint: its request head must be whole within kHeadTimeoutUs (a
// scraper sends it at once; a slowloris that trickles bytes is dropped), the
// answer be taken within kConnectionTimeoutUs, and when kMaxConnections are
// open a new one takes the place of the oldest still sending its head.
#pragma once

#include <sys/socket.h>
#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "metrics_http.h"

namespace xferd {

class MetricsServer {
 public:
  using Page = std::function<std::string()>;
  MetricsServer(sd_event* loop, Page page);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Listens on address (parse_listen_address); throws std::runtime_error
  // naming the address and the reason.
  void listen(const std::string& address);
  // Serves on a listening socket systemd passed (socket activation).
  void serve(int listen_fd, const std::string& what);
  // Writes the page to path every interval_s, through a temporary file
  // renamed over it (a reader never sees half a page). Throws
  // std::runtime_error when path's directory is one another user could
  // write (xferd writes there as root).
  void textfile(const std::string& path, double interval_s);
  // What textfile() refuses (not absolute, or a directory or file another
  // user could write), without writing: --check-config runs it too.
  static void check_textfile(const std::string& path);
  void write_textfile();  // now (also at each interval)

  const std::vector<std::string>& endpoints() const { return endpoints_; }
  uint64_t scrapes() const { return scrapes_; }

  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr size_t kMaxConnections = 8;
  static constexpr uint64_t kHeadTimeoutUs = 1'500'000;
  static constexpr uint64_t kConnectionTimeoutUs = 10'000'000;

 private:
  struct Connection;
  static int on_accept(sd_event_source* s, int fd, uint32_t events, void* ud);
  static int on_io(sd_event_source* s, int fd, uint32_t events, void* ud);
  static int on_timeout(sd_event_source* s, uint64_t usec, void* ud);
  void drop(Connection* c);
  // Room for one more: false when every connection open is being answered.
  bool make_room();
  sd_event* loop_;
  Page page_;
  std::vector<sd_event_source*> listeners_;
  std::vector<std::string> endpoints_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::string textfile_;
  double textfile_interval_s_ = 0;
  sd_event_source* textfile_timer_ = nullptr;
  uint64_t scrapes_ = 0;
};

}  // namespace xferd
