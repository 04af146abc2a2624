// Discovery, before the first byte: one probe per origin (which HTTP version
// it speaks, and the RTT from its TCP handshake), then HEAD requests for the
// files the manifest gives no size for, and, where the probe only connects,
// the connections the transfer's first params will open (discovery.cpp).
// It hands the transfer the path's RTT, the probe's connection when it can
// be reused (kept_probe) and the sockets opened ahead (take_preconnected),
// and closes what the transfer does not take. Private to the engine.
#pragma once

#include <curl/curl.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "request.h"
#include "xfer/engine.h"

namespace xfer {

// RAII for an sd-event source.
struct EventSource {
  sd_event_source* s = nullptr;
  ~EventSource() { reset(); }
  void reset() {
    if (s) sd_event_source_disable_unref(s);
    s = nullptr;
  }
  // A one-shot timer at at_us (CLOCK_MONOTONIC): made at the first call,
  // moved at the next ones.
  void arm_at(sd_event* loop, uint64_t at_us, sd_event_time_handler_t fire, void* ud, uint64_t accuracy_us = 1000) {
    if (!s) sd_event_add_time(loop, &s, CLOCK_MONOTONIC, at_us, accuracy_us, fire, ud);
    else sd_event_source_set_time(s, at_us);
    if (s) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
  }
};

struct HeadItem {
  FileTask* file = nullptr;
  bool probe = false;
  uint64_t not_before_us = 0;
  bool fresh_connection = false;
};

class Discovery {
 public:
  explicit Discovery(Job::Impl& job) : job_(job) {}
  Discovery(const Discovery&) = delete;
  Discovery& operator=(const Discovery&) = delete;

  void start();     // the job is Discovering: a probe per origin, and the preconnects
  void dispatch();  // the HEADs that may go now; when none is left, the transfer begins
  void on_head_done(std::unique_ptr<Request> r, CURLcode code);
  // Stops: discovery's own handle and the probe's kept connection go, and
  // every socket opened ahead is closed.
  void stop();

  // What the transfer takes over.
  double rtt_s = 0;  // the least handshake of the probes (0: none measured)
  // When discovery opened one connection and it is still in the pool, the
  // transfer's first connection of a matching kind takes the handle over:
  // its first request goes out on that connection instead of opening
  // another (over TLS: one TCP and one TLS handshake fewer, about 3 RTTs
  // before the first byte). Otherwise its idle connections close with it
  // when the transfer begins.
  struct KeptProbe {
    std::unique_ptr<CurlMulti> multi;
    std::string origin;
    int fd = -1;
    bool tls = false;
    bool needs_h2 = false;  // h2 was negotiated by ALPN: only a connection offering h2 reuses it
  } kept_probe;
  // Connections opened ahead (EngineOptions::preconnect): where the probe
  // only connects, it and preconnect - 1 more connect-only requests open
  // their connections at once, and their sockets outlive the requests
  // (close_socket keeps what is in held_fds). The transfer's first
  // connections take them (CURLOPT_OPENSOCKETFUNCTION, take_preconnected;
  // CURL_SOCKOPT_ALREADY_CONNECTED): its first requests go out one round
  // trip after the probe's connect, not two. What is not taken is closed a
  // few round trips later (hold_preconnected).
  bool preconnect_window = false;  // Gets look for their sockets here
  size_t preconnected_opened = 0, preconnected_used = 0;
  int take_preconnected(const sockaddr* a, socklen_t len);
  // The transfer began (at this RTT): what it has not taken a few round
  // trips from now (at least a second) is closed.
  void hold_preconnected(double rtt_s);
  void drop_preconnected();
  // curl's CURLOPT_CLOSESOCKETFUNCTION for every request of the job (ud: the Job::Impl).
  static int close_socket(void* ud, curl_socket_t fd);

 private:
  void make_preconnect(Request* r);
  void end_preconnect(std::unique_ptr<Request> r, bool connected);
  void keep_or_retire();

  Job::Impl& job_;
  std::unique_ptr<CurlMulti> multi_;  // discovery's own handle
  std::deque<HeadItem> heads_;
  int heads_inflight_ = 0;
  int connects_ = 0;    // connections discovery's requests opened
  int probe_fd_ = -1;   // the probe's socket, -1 when not reusable
  struct Preconnected {
    int fd = -1;
    sockaddr_storage peer{};
    socklen_t len = 0;
  };
  std::vector<Preconnected> preconnected_;
  std::set<int> held_fds_;      // sockets of preconnect requests: curl's close leaves them open
  std::set<int> released_fds_;  // ...those curl has closed (let go of)
  EventSource drop_src_;
  int preconnects_inflight_ = 0;  // beside the probes, still connecting
  uint64_t grace_us_ = 0;         // discovery waits for them until then
};

}  // namespace xfer
