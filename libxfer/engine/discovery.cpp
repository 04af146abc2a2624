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

void Discovery::start() {
  job_.set_state(JobState::Discovering);
  multi_ = std::make_unique<CurlMulti>(job_.eng.loop());
  // One probe per origin, on its first file.
  for (FileTask& f : job_.files) {
    if (f.state != FileTask::State::Pending) continue;
    Origin& o = job_.origins[f.origin];
    if (o.probe_file) continue;
    o.probe_file = &f;
    o.probing = true;
    const std::string& mode = job_.spec.opts.http;
    bool http = f.entry->url.rfind("http:", 0) == 0;
    const JobCredentials* creds = job_.spec.opts.credentials.get();
    const Credentials* c = creds ? creds->find(f.origin) : nullptr;
    o.prior_knowledge = http && mode != "1.1" && !(c && c->challenged());  // Digest: HTTP/1.1 (see challenged())
    o.connect_probe = http && mode == "1.1";
    if (!http) log::info("{}: https, {}", f.origin, job_.tls_trust());
    heads_.push_back({&f, true, 0});
  }
  // Beside each probe that only connects, the connections the transfer's
  // first params will open (at most one per file of the origin).
  for (auto& [name, o] : job_.origins) {
    if (!o.connect_probe) continue;
    preconnect_window = true;
    int n = 0;
    for (const FileTask& f : job_.files) n += f.origin == name && f.state == FileTask::State::Pending;
    for (int i = 1; i < std::min(job_.spec.opts.preconnect, n); ++i) {
      Request* r = job_.new_request(RequestKind::Head, o.probe_file, *multi_);
      make_preconnect(r);
      curl_easy_setopt(r->easy, CURLOPT_FRESH_CONNECT, 1L);
      multi_->add(r);
      ++preconnects_inflight_;
    }
  }
  dispatch();
}

void Discovery::make_preconnect(Request* r) {
  r->preconnect = true;
  curl_easy_setopt(r->easy, CURLOPT_CONNECT_ONLY, 1L);
  curl_easy_setopt(r->easy, CURLOPT_SOCKOPTFUNCTION, +[](void* ud, curl_socket_t fd, curlsocktype purpose) {
    auto* req = static_cast<Request*>(ud);
    if (purpose == CURLSOCKTYPE_IPCXN) {
      req->held.push_back(fd);
      static_cast<Job::Impl*>(req->owner)->disc.held_fds_.insert(fd);
    }
    return int(CURL_SOCKOPT_OK);
  });
  curl_easy_setopt(r->easy, CURLOPT_SOCKOPTDATA, r);
}

int Discovery::close_socket(void* ud, curl_socket_t fd) {
  auto* job = static_cast<Job::Impl*>(ud);
  if (job->disc.held_fds_.count(fd)) {
    job->disc.released_fds_.insert(fd);  // end_preconnect decides
    return 0;
  }
  if (job->flow_monitor) job->flow_monitor->disown(fd);
  return close(fd);
}

// A preconnect request is done (or given up): curl lets go of its sockets,
// and the one that connected waits in `preconnected_`; the others close.
void Discovery::end_preconnect(std::unique_ptr<Request> r, bool connected) {
  std::vector<int> fds = std::move(r->held);
  r.reset();
  bool kept = false;
  for (int fd : fds) {
    held_fds_.erase(fd);
    if (!released_fds_.erase(fd)) continue;  // still curl's, which closes it
    Preconnected c;
    c.fd = fd;
    c.len = sizeof c.peer;
    int err = 0;
    socklen_t err_len = sizeof err;
    if (connected && !kept && preconnect_window && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) == 0 &&
        err == 0 && getpeername(fd, reinterpret_cast<sockaddr*>(&c.peer), &c.len) == 0) {
      preconnected_.push_back(c);
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
int Discovery::take_preconnected(const sockaddr* a, socklen_t) {
  for (auto it = preconnected_.begin(); it != preconnected_.end();) {
    if (!same_peer(a, it->peer)) {
      ++it;
      continue;
    }
    int fd = it->fd;
    it = preconnected_.erase(it);
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

void Discovery::drop_preconnected() {
  preconnect_window = false;
  drop_src_.reset();
  for (const Preconnected& c : preconnected_) close(c.fd);
  preconnected_.clear();
  for (int fd : released_fds_) close(fd);  // of requests that ended some other way
  released_fds_.clear();
  held_fds_.clear();  // still curl's: it closes them
}

void Discovery::hold_preconnected(double rtt) {
  if (!preconnect_window) return;
  uint64_t wait_us = std::max<uint64_t>(1000000, uint64_t(4 * rtt * 1e6));
  sd_event_add_time_relative(
      job_.eng.loop(), &drop_src_.s, CLOCK_MONOTONIC, wait_us, 10000,
      [](sd_event_source*, uint64_t, void* ud) {
        auto* self = static_cast<Discovery*>(ud);
        log::JobScope scope(self->job_.log_id);
        if (!self->preconnected_.empty())
          log::debug("{} connection(s) opened ahead were not needed: closed", self->preconnected_.size());
        self->drop_preconnected();
        return 0;
      },
      this);
}

void Discovery::stop() {
  drop_preconnected();
  multi_.reset();
  kept_probe.multi.reset();
}

void Discovery::dispatch() {
  if (job_.state != JobState::Discovering) return;
  uint64_t now = job_.eng.now_us();
  for (auto it = heads_.begin(); it != heads_.end() && heads_inflight_ < job_.spec.opts.discovery_concurrency;) {
    if (it->not_before_us > now) {
      job_.arm_retry(it->not_before_us);
      ++it;
      continue;
    }
    Request* r = job_.new_request(RequestKind::Head, it->file, *multi_);
    r->probe = it->probe;
    if (r->probe && job_.origins[it->file->origin].connect_probe) make_preconnect(r);
    if (it->fresh_connection) curl_easy_setopt(r->easy, CURLOPT_FRESH_CONNECT, 1L);
    ++heads_inflight_;
    multi_->add(r);
    it = heads_.erase(it);
  }
  if (heads_.empty() && heads_inflight_ == 0) {
    // The connections opened beside the probe answer with it, give or take
    // a few ms: a quarter of its handshake (20-100 ms) is waited for them.
    // (At 2 ms at least, a loaded machine's loopback gave one of four up:
    // curl had not yet seen it connect, and the transfer opened a fifth.)
    if (preconnects_inflight_ > 0) {
      uint64_t grace = std::clamp<uint64_t>(uint64_t(rtt_s * 0.25e6), 20000, 100000);
      if (!grace_us_) grace_us_ = now + grace;
      if (now < grace_us_) {
        job_.arm_retry(grace_us_);
        return;
      }
    }
    keep_or_retire();
    job_.begin_transfer();
  }
}

void Discovery::keep_or_retire() {
  // Connections still opening beside the probe are not waited for (a lost
  // SYN waits a second): given up.
  for (auto it = job_.requests.begin(); it != job_.requests.end();) {
    Request* r = (it++)->first;
    if (r->preconnect && r->multi == multi_.get()) {
      r->multi->remove(r);
      end_preconnect(job_.take(r), false);
      --preconnects_inflight_;
    }
  }
  // Reusable: one origin, whose probe asked (not connect-only) and succeeded
  // on the only connection discovery opened. curl checks the connection is
  // alive before it reuses it, and opens a new one in the same handle if not.
  const Origin* o = job_.origins.size() == 1 ? &job_.origins.begin()->second : nullptr;
  if (o && o->known && !o->connect_probe && probe_fd_ >= 0 && connects_ == 1) {
    kept_probe.origin = job_.origins.begin()->first;
    kept_probe.fd = probe_fd_;
    kept_probe.tls = strncasecmp(kept_probe.origin.c_str(), "https:", 6) == 0;
    kept_probe.needs_h2 = kept_probe.tls && o->h2;
    kept_probe.multi = std::move(multi_);
    return;
  }
  job_.retire(std::move(multi_));
}

void Discovery::on_head_done(std::unique_ptr<Request> r, CURLcode code) {
  if (r->preconnect && !r->probe) {  // opened beside the probe: only its socket matters
    end_preconnect(std::move(r), code == CURLE_OK);
    --preconnects_inflight_;
    dispatch();  // the last one may be what discovery waits for
    return;
  }
  // The probe's socket, however this ends (before the transfer begins, in
  // dispatch, when this was the last request of discovery).
  struct EndPreconnect {
    Discovery* disc;
    std::unique_ptr<Request>& r;
    bool ok;
    ~EndPreconnect() {
      if (r && r->preconnect) disc->end_preconnect(std::move(r), ok);
    }
  } end_probe{this, r, code == CURLE_OK};
  --heads_inflight_;
  FileTask* f = r->file;
  const bool probe = r->probe;
  Origin& o = job_.origins[f->origin];
  const bool connect_only = probe && o.connect_probe;
  long connects = 0;
  if (curl_easy_getinfo(r->easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK) connects_ += int(connects);

  if (probe && code != CURLE_OK && code != CURLE_HTTP_RETURNED_ERROR && o.prior_knowledge && job_.spec.opts.http == "auto") {
    // Not an h2c server (or not reachable at all): ask again in HTTP/1.1.
    log::info("{}: no h2c with prior knowledge ({}); using HTTP/1.1", f->origin, curl_easy_strerror(code));
    o.prior_knowledge = false;
    heads_.push_front({f, true, 0});
    dispatch();
    return;
  }
  if (!connect_only && job_.redirected(f, r.get()) == Job::Impl::Redirected::Follow) {
    heads_.push_front({f, probe, 0});  // asked again where it now goes
    dispatch();
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
      if (!connect_only) probe_fd_ = r->fd;
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
    job_.fail_file(f, r->abort_reason);  // our own reason (endless headers): no retry
  } else {
    Failure why = classify(code, r->easy, r->errbuf);
    long http = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &http);
    if (code == CURLE_HTTP_RETURNED_ERROR && (http == 401 || http == 403) && !r->auth_deferred)
      why.reason += job_.refused_auth(f, r.get(), http);
    if (code == CURLE_HTTP_RETURNED_ERROR && http == 401 && r->auth_deferred) {
      log::info("{}: HEAD answered 401 (Digest goes with the downloads); size learned from the download", f->entry->name);
    } else if (code == CURLE_HTTP_RETURNED_ERROR && (http == 405 || http == 501)) {
      log::info("{}: server refuses HEAD ({}); size learned from the download", f->entry->name, why.reason);
    } else if (why.retryable && (!counts_as_attempt(f, why) || ++f->failures <= job_.spec.opts.max_retries)) {
      job_.fresh_retries.note(why);
      heads_.push_back({f, probe, job_.eng.now_us() + backoff_us(std::max(1, f->failures)), why.fresh_connection()});
      dispatch();
      return;
    } else {
      if (f->failures > job_.spec.opts.max_retries) why.reason += " (after " + std::to_string(f->failures) + " attempts)";
      job_.fail_file(f, why.reason);
    }
    if (probe) {
      // An HTTP answer (a 401, a 404) still says the protocol; without one,
      // it stays unknown and HTTP/1.1 is the safe choice.
      long v = 0;
      curl_easy_getinfo(r->easy, CURLINFO_HTTP_VERSION, &v);
      o.known = true;
      o.probing = false;
      o.h2 = code == CURLE_HTTP_RETURNED_ERROR && v == CURL_HTTP_VERSION_2_0;
      if (!o.h2) o.prior_knowledge = false;
    }
  }
  f->failures = 0;
  if (probe) {
    // The origin is known: HEAD every other file of it that lacks a size.
    for (FileTask& g : job_.files)
      if ((&g != f || connect_only) && g.origin == f->origin && g.state == FileTask::State::Pending && !g.size)
        heads_.push_back({&g, false, 0});
  }
  if (r->preconnect) end_preconnect(std::move(r), code == CURLE_OK);  // in the pool before the transfer begins
  dispatch();
}

uint64_t backoff_us(int failures) {
  // 250 ms doubling to at most 8 s, with +-20% jitter so retries do not align.
  static std::mt19937 rng{std::random_device{}()};
  double base = std::min(8.0, 0.25 * double(1u << std::min(failures - 1, 6)));
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  return static_cast<uint64_t>(base * jitter(rng) * 1e6);
}

}  // namespace xfer
