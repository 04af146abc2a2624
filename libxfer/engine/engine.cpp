// libcurl multi handles on sd-event: the socket callback maps curl's interest in a
// socket onto an sd-event io source (curl_multi_assign keeps the source with
// the socket); the timer callback arms one sd-event timer; every wake-up calls
// curl_multi_socket_action and then drains curl_multi_info_read.
// (The shape of curl's ephiperfifo example, on sd-event instead of epoll.)
#include "xfer/engine.h"

#include <curl/curl.h>

#include <stdexcept>

#include "file_work.h"
#include "request.h"
#include "xfer/log.h"

namespace xfer {

namespace {
struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};
}  // namespace

Engine::Engine(sd_event* loop) : loop_(sd_event_ref(loop)), file_work_(std::make_unique<FileWork>(loop)) {
  static CurlGlobal global;
}

Engine::~Engine() {
  file_work_.reset();
  sd_event_unref(loop_);
}

uint64_t Engine::now_us() const {
  uint64_t t = 0;
  sd_event_now(loop_, CLOCK_MONOTONIC, &t);
  return t;
}

CurlMulti::CurlMulti(sd_event* loop) : loop_(sd_event_ref(loop)) {
  multi_ = curl_multi_init();
  if (!multi_) throw std::runtime_error("curl_multi_init failed");
  curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &CurlMulti::socket_cb);
  curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &CurlMulti::timer_cb);
  curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
  // curl's timeouts are whole milliseconds: a millisecond of slack lets
  // sd-event share one timerfd setting with the loop's other timers.
  int r = sd_event_add_time(loop_, &timer_, CLOCK_MONOTONIC, UINT64_MAX, 1000, &CurlMulti::on_timer, this);
  if (r < 0) throw std::runtime_error("sd_event_add_time failed");
  sd_event_source_set_enabled(timer_, SD_EVENT_OFF);
  r = sd_event_add_defer(loop_, &run_now_, &CurlMulti::on_run_now, this);
  if (r < 0) throw std::runtime_error("sd_event_add_defer failed");
  sd_event_source_set_enabled(run_now_, SD_EVENT_OFF);
}

CurlMulti::~CurlMulti() {
  curl_multi_cleanup(multi_);
  for (sd_event_source* s : io_sources_) sd_event_source_disable_unref(s);
  sd_event_source_disable_unref(timer_);
  sd_event_source_disable_unref(run_now_);
  sd_event_unref(loop_);
}

void CurlMulti::add(Request* r) {
  r->multi = this;
  log_job_ = r->owner->log_job();  // a handle serves one job's requests
  curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
  CURLMcode rc = curl_multi_add_handle(multi_, r->easy);
  if (rc != CURLM_OK) throw std::runtime_error(std::string("curl_multi_add_handle: ") + curl_multi_strerror(rc));
}

void CurlMulti::remove(Request* r) { curl_multi_remove_handle(multi_, r->easy); }

void CurlMulti::end(Request* r, int curl_code) {
  log::JobScope scope(log_job_);
  curl_multi_remove_handle(multi_, r->easy);
  r->owner->on_request_done(r, static_cast<CURLcode>(curl_code));  // may delete r and add new requests
}

int CurlMulti::socket_cb(void* easy, int s, int what, void* userp, void* socketp) {
  auto* self = static_cast<CurlMulti*>(userp);
  auto* src = static_cast<sd_event_source*>(socketp);
  if (what == CURL_POLL_REMOVE) {
    if (src) {
      self->io_sources_.erase(src);
      sd_event_source_disable_unref(src);
    }
    curl_multi_assign(self->multi_, s, nullptr);
    return 0;
  }
  Request* req = nullptr;
  if (easy && curl_easy_getinfo(easy, CURLINFO_PRIVATE, reinterpret_cast<char**>(&req)) == CURLE_OK && req)
    req->fd = s;  // the request's connection, for its wake-up pacing
  uint32_t events = 0;
  if (what & CURL_POLL_IN) events |= EPOLLIN;
  if (what & CURL_POLL_OUT) events |= EPOLLOUT;
  if (!src) {
    int r = sd_event_add_io(self->loop_, &src, s, events, &CurlMulti::on_io, self);
    if (r < 0) {
      log::error("sd_event_add_io(fd {}) failed: {}", s, strerror(-r));
      return -1;
    }
    self->io_sources_.insert(src);
    curl_multi_assign(self->multi_, s, src);
  } else {
    sd_event_source_set_io_events(src, events);
  }
  return 0;
}

// curl moves its timer about once per request (0 ms when a request is added
// or a connection freed, then its connect and speed-check deadlines), and
// each move of the timer was a timerfd_settime: 7.7% of the engine's CPU on
// a thousand small files (perf, loopback). A wake-up that comes early costs
// less: curl finds nothing due and names its next deadline. So "now" runs
// from a defer source (no system call), a later deadline than the one armed
// leaves the armed one, and "no timer" leaves a pending wake-up to fire once.
int CurlMulti::timer_cb(CURLM* /*multi*/, long timeout_ms, void* userp) {
  auto* self = static_cast<CurlMulti*>(userp);
  if (timeout_ms < 0) return 0;
  if (timeout_ms == 0) {
    self->ran_now_asked_ = true;
    return sd_event_source_set_enabled(self->run_now_, SD_EVENT_ONESHOT) < 0 ? -1 : 0;
  }
  uint64_t now = 0;
  sd_event_now(self->loop_, CLOCK_MONOTONIC, &now);
  uint64_t due = now + static_cast<uint64_t>(timeout_ms) * 1000;
  if (sd_event_source_get_enabled(self->timer_, nullptr) > 0 && self->due_ <= due) return 0;
  self->due_ = due;
  if (sd_event_source_set_time(self->timer_, due) < 0) return -1;
  return sd_event_source_set_enabled(self->timer_, SD_EVENT_ONESHOT) < 0 ? -1 : 0;
}

int CurlMulti::on_io(sd_event_source* /*s*/, int fd, uint32_t revents, void* userdata) {
  int mask = 0;
  if (revents & EPOLLIN) mask |= CURL_CSELECT_IN;
  if (revents & EPOLLOUT) mask |= CURL_CSELECT_OUT;
  if (revents & (EPOLLERR | EPOLLHUP)) mask |= CURL_CSELECT_ERR;
  static_cast<CurlMulti*>(userdata)->action(fd, mask);
  return 0;
}

int CurlMulti::on_timer(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) {
  static_cast<CurlMulti*>(userdata)->action(CURL_SOCKET_TIMEOUT, 0);
  return 0;
}

int CurlMulti::on_run_now(sd_event_source* /*s*/, void* userdata) {
  static_cast<CurlMulti*>(userdata)->action(CURL_SOCKET_TIMEOUT, 0);
  return 0;
}

// A request that ends often adds its successor (drain -> on_request_done),
// and curl asks to be run at once to send it. That runs here, before the
// loop turns: sd-event dispatches one source per turn, so the defer source
// would wait behind every other ready socket (their reads and writes), and
// each such wait is idle time on the successor's connection (measured on
// 1000 files of 100 KB at 40 ms, 16 connections: the span from first to
// last request was about 60 ms longer than curl --parallel's, a mean gap of
// 58.0 ms between a connection's requests against 56.9; with this, equal).
// A few rounds at most; what is left still runs from the defer source.
void CurlMulti::action(int fd, int mask) {
  log::JobScope scope(log_job_);  // libcurl's callbacks (a body's bytes, a header) log for its job
  int running = 0;
  ran_now_asked_ = false;
  curl_multi_socket_action(multi_, fd, mask, &running);
  drain();
  for (int round = 0; round < 4 && ran_now_asked_; ++round) {
    ran_now_asked_ = false;
    sd_event_source_set_enabled(run_now_, SD_EVENT_OFF);
    curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
    drain();
  }
}

void CurlMulti::drain() {
  int left = 0;
  while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
    if (m->msg != CURLMSG_DONE) continue;
    Request* r = nullptr;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&r));
    CURLcode code = m->data.result;
    end(r, code);  // may delete r and add new requests
  }
}

}  // namespace xfer
