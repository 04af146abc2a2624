// Discovery, before the first byte: one probe per origin (which HTTP version
// it speaks; for http:// in auto mode, h2c with prior knowledge is tried first
// and HTTP/1.1 is the fallback; the TCP handshake time gives the RTT), then
// concurrent HEAD requests for the files the manifest gives no size for.
// Where nothing is left to ask (http:// with --http 1.1) the probe only
// connects: the transfer starts one round trip earlier, and the probe's
// connection and the ones opened beside it are the transfer's first
// (EngineOptions::preconnect).
#include <netinet/in.h>
#include <poll.h>
#include <strings.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "job_impl.h"
#include "xfer/log.h"

namespace xfer {

uint64_t backoff_us(int failures);

void Job::Impl::start_discovery() {
  set_state(JobState::Discovering);
  discovery = std::make_unique<CurlMulti>(eng.loop());
  // One probe per origin, on its first file.
  for (FileTask& f : files) {
    if (f.state != FileTask::State::Pending) continue;
    Origin& o = origins[f.origin];
    if (o.probe_file) continue;
    o.probe_file = &f;
    o.probing = true;
    const std::string& mode = spec.opts.http;
    bool http = f.entry->url.rfind("http:", 0) == 0;
    o.prior_knowledge = http && mode != "1.1";
    o.connect_probe = http && mode == "1.1";
    if (!http) log::info("{}: https, {}", f.origin, tls_trust());
    heads.push_back({&f, true, 0});
  }
  // Beside each probe that only connects, the connections the transfer's
  // first params will open (at most one per file of the origin).
  for (auto& [name, o] : origins) {
    if (!o.connect_probe) continue;
    preconnect_window = true;
    int n = 0;
    for (const FileTask& f : files) n += f.origin == name && f.state == FileTask::State::Pending;
    for (int i = 1; i < std::min(spec.opts.preconnect, n); ++i) {
      Request* r = new_request(RequestKind::Head, o.probe_file, *discovery);
      make_preconnect(r);
      curl_easy_setopt(r->easy, CURLOPT_FRESH_CONNECT, 1L);
      discovery->add(r);
      ++preconnects_inflight;
    }
  }
  dispatch_heads();
}

void Job::Impl::make_preconnect(Request* r) {
  r->preconnect = true;
  curl_easy_setopt(r->easy, CURLOPT_CONNECT_ONLY, 1L);
  curl_easy_setopt(r->easy, CURLOPT_SOCKOPTFUNCTION, +[](void* ud, curl_socket_t fd, curlsocktype purpose) {
    auto* req = static_cast<Request*>(ud);
    if (purpose == CURLSOCKTYPE_IPCXN) {
      req->held.push_back(fd);
      static_cast<Job::Impl*>(req->owner)->held_fds.insert(fd);
    }
    return int(CURL_SOCKOPT_OK);
  });
  curl_easy_setopt(r->easy, CURLOPT_SOCKOPTDATA, r);
}

int Job::Impl::close_socket(void* ud, curl_socket_t fd) {
  auto* self = static_cast<Job::Impl*>(ud);
  if (self->held_fds.count(fd)) {
    self->released_fds.insert(fd);  // end_preconnect decides
    return 0;
  }
  if (self->flow_monitor) self->flow_monitor->disown(fd);
  return close(fd);
}

// A preconnect request is done (or given up): curl lets go of its sockets,
// and the one that connected waits in `preconnected`; the others close.
void Job::Impl::end_preconnect(std::unique_ptr<Request> r, bool connected) {
  std::vector<int> fds = std::move(r->held);
  r.reset();
  bool kept = false;
  for (int fd : fds) {
    held_fds.erase(fd);
    if (!released_fds.erase(fd)) continue;  // still curl's, which closes it
    Preconnected c;
    c.fd = fd;
    c.len = sizeof c.peer;
    int err = 0;
    socklen_t err_len = sizeof err;
    if (connected && !kept && preconnect_window && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) == 0 &&
        err == 0 && getpeername(fd, reinterpret_cast<sockaddr*>(&c.peer), &c.len) == 0) {
      preconnected.push_back(c);
      ++preconnected_opened;
      kept = true;
    } else {
      close(fd);
    }
  }
}

namespace {
bool same_peer(const sockaddr* a, const sockaddr_storage& b) {
  if (a->sa_family != b.ss_family) return false;
  if (a->sa_family == AF_INET) {
    const auto* x = reinterpret_cast<const sockaddr_in*>(a);
    const auto* y = reinterpret_cast<const sockaddr_in*>(&b);
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    const auto* x = reinterpret_cast<const sockaddr_in6*>(a);
    const auto* y = reinterpret_cast<const sockaddr_in6*>(&b);
    return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
           std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
  }
  return false;
}
}  // namespace

// A connected socket to that address, opened at discovery, for a new
// connection of the transfer; -1: none. One the server has closed (or
// written to) meanwhile is not handed out.
int Job::Impl::take_preconnected(const sockaddr* a, socklen_t) {
  for (auto it = preconnected.begin(); it != preconnected.end();) {
    if (!same_peer(a, it->peer)) {
      ++it;
      continue;
    }
    int fd = it->fd;
    it = preconnected.erase(it);
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) != 0) {
      close(fd);
      continue;
    }
    ++preconnected_used;
    return fd;
  }
  return -1;
}

void Job::Impl::drop_preconnected() {
  preconnect_window = false;
  preconnect_drop_src.reset();
  for (const Preconnected& c : preconnected) close(c.fd);
  preconnected.clear();
  for (int fd : released_fds) close(fd);  // of requests that ended some other way
  released_fds.clear();
  held_fds.clear();  // still curl's: it closes them
}

void Job::Impl::dispatch_heads() {
  if (state != JobState::Discovering) return;
  uint64_t now = eng.now_us();
  for (auto it = heads.begin(); it != heads.end() && heads_inflight < spec.opts.discovery_concurrency;) {
    if (it->not_before_us > now) {
      arm_retry(it->not_before_us);
      ++it;
      continue;
    }
    Request* r = new_request(RequestKind::Head, it->file, *discovery);
    r->probe = it->probe;
    if (r->probe && origins[it->file->origin].connect_probe) make_preconnect(r);
    if (it->fresh_connection) curl_easy_setopt(r->easy, CURLOPT_FRESH_CONNECT, 1L);
    ++heads_inflight;
    discovery->add(r);
    it = heads.erase(it);
  }
  if (heads.empty() && heads_inflight == 0) {
    // The connections opened beside the probe answer with it, give or take
    // a few ms: a quarter of its handshake (2-100 ms) is waited for them.
    if (preconnects_inflight > 0) {
      uint64_t grace = std::clamp<uint64_t>(uint64_t(rtt_s * 0.25e6), 2000, 100000);
      if (!preconnect_grace_us) preconnect_grace_us = now + grace;
      if (now < preconnect_grace_us) {
        arm_retry(preconnect_grace_us);
        return;
      }
    }
    keep_or_retire_discovery();
    begin_transfer();
  }
}

void Job::Impl::keep_or_retire_discovery() {
  // Connections still opening beside the probe are not waited for (a lost
  // SYN waits a second): given up.
  for (auto it = requests.begin(); it != requests.end();) {
    Request* r = (it++)->first;
    if (r->preconnect && r->multi == discovery.get()) {
      r->multi->remove(r);
      end_preconnect(take(r), false);
      --preconnects_inflight;
    }
  }
  // Reusable: one origin, whose probe asked (not connect-only) and succeeded
  // on the only connection discovery opened. curl checks the connection is
  // alive before it reuses it, and opens a new one in the same handle if not.
  const Origin* o = origins.size() == 1 ? &origins.begin()->second : nullptr;
  if (o && o->known && !o->connect_probe && probe_fd >= 0 && discovery_connects == 1) {
    kept_probe.origin = origins.begin()->first;
    kept_probe.fd = probe_fd;
    kept_probe.tls = strncasecmp(kept_probe.origin.c_str(), "https:", 6) == 0;
    kept_probe.needs_h2 = kept_probe.tls && o->h2;
    kept_probe.multi = std::move(discovery);
    return;
  }
  retire(std::move(discovery));
}

void Job::Impl::on_head_done(std::unique_ptr<Request> r, CURLcode code) {
  if (r->preconnect && !r->probe) {  // opened beside the probe: only its socket matters
    end_preconnect(std::move(r), code == CURLE_OK);
    --preconnects_inflight;
    dispatch_heads();  // the last one may be what discovery waits for
    return;
  }
  // The probe's socket, however this ends (before the transfer begins, in
  // dispatch_heads, when this was the last request of discovery).
  struct EndPreconnect {
    Job::Impl* job;
    std::unique_ptr<Request>& r;
    bool ok;
    ~EndPreconnect() {
      if (r && r->preconnect) job->end_preconnect(std::move(r), ok);
    }
  } end_probe{this, r, code == CURLE_OK};
  --heads_inflight;
  FileTask* f = r->file;
  const bool probe = r->probe;
  Origin& o = origins[f->origin];
  const bool connect_only = probe && o.connect_probe;
  long connects = 0;
  if (curl_easy_getinfo(r->easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK) discovery_connects += int(connects);

  if (probe && code != CURLE_OK && o.prior_knowledge && spec.opts.http == "auto") {
    // Not an h2c server (or not reachable at all): ask again in HTTP/1.1.
    log::info("{}: no h2c with prior knowledge ({}); using HTTP/1.1", f->origin, curl_easy_strerror(code));
    o.prior_knowledge = false;
    heads.push_front({f, true, 0});
    dispatch_heads();
    return;
  }
  if (code == CURLE_OK) {
    if (probe) {
      long v = 0;
      curl_easy_getinfo(r->easy, CURLINFO_HTTP_VERSION, &v);
      o.h2 = v == CURL_HTTP_VERSION_2_0;
      o.known = true;
      o.probing = false;
      curl_off_t connect = 0, lookup = 0;
      curl_easy_getinfo(r->easy, CURLINFO_CONNECT_TIME_T, &connect);
      curl_easy_getinfo(r->easy, CURLINFO_NAMELOOKUP_TIME_T, &lookup);
      double rtt = double(connect - lookup) / 1e6;
      if (rtt > 0 && (rtt_s == 0 || rtt < rtt_s)) rtt_s = rtt;
      log::info("{}: {}; handshake {:.3f} ms", f->origin, connect_only ? "HTTP/1.1 (--http 1.1)" : o.h2 ? "speaks HTTP/2" : "speaks HTTP/1.1", rtt * 1e3);
      // The socket the HEAD's answer came on, as curl's socket callback last
      // named it (CURLINFO_ACTIVESOCKET answers only for connect-only).
      if (!connect_only) probe_fd = r->fd;
    }
    if (connect_only) {
      // Nothing was asked: the file's size, if missing, is asked below.
    } else if (!f->size) {
      curl_off_t cl = -1;
      curl_easy_getinfo(r->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
      if (cl >= 0) f->size = static_cast<uint64_t>(cl);
      else log::info("{}: server gives no size; fetched whole on one stream", f->entry->name);
    }
  } else if (!r->abort_reason.empty()) {
    fail_file(f, r->abort_reason);  // our own reason (endless headers): no retry
  } else {
    Failure why = classify(code, r->easy, r->errbuf);
    long http = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &http);
    if (code == CURLE_HTTP_RETURNED_ERROR && (http == 405 || http == 501)) {
      log::info("{}: server refuses HEAD ({}); size learned from the download", f->entry->name, why.reason);
    } else if (why.retryable && (!counts_as_attempt(f, why) || ++f->failures <= spec.opts.max_retries)) {
      heads.push_back({f, probe, eng.now_us() + backoff_us(f->failures), why.fresh_connection});
      dispatch_heads();
      return;
    } else {
      if (f->failures > spec.opts.max_retries) why.reason += " (after " + std::to_string(f->failures) + " attempts)";
      fail_file(f, why.reason);
    }
    if (probe) {  // the origin's protocol stays unknown: HTTP/1.1 is the safe choice
      o.known = true;
      o.probing = false;
      o.h2 = false;
      o.prior_knowledge = false;
    }
  }
  f->failures = 0;
  if (probe) {
    // The origin is known: HEAD every other file of it that lacks a size.
    for (FileTask& g : files)
      if ((&g != f || connect_only) && g.origin == f->origin && g.state == FileTask::State::Pending && !g.size)
        heads.push_back({&g, false, 0});
  }
  if (r->preconnect) end_preconnect(std::move(r), code == CURLE_OK);  // in the pool before the transfer begins
  dispatch_heads();
}

uint64_t backoff_us(int failures) {
  // 250 ms doubling to at most 8 s, with +-20% jitter so retries do not align.
  static std::mt19937 rng{std::random_device{}()};
  double base = std::min(8.0, 0.25 * double(1u << std::min(failures - 1, 6)));
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  return static_cast<uint64_t>(base * jitter(rng) * 1e6);
}

}  // namespace xfer
