#include "metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

#include "config.h"
#include "metrics.h"
#include "xfer/log.h"
#include "xfer/safe_open.h"
#include "xfer/text.h"

namespace xferd {

namespace log = xfer::log;

struct MetricsServer::Connection {
  MetricsServer* server = nullptr;
  int fd = -1;
  sd_event_source* io = nullptr;
  sd_event_source* timer = nullptr;
  std::string in, out;
  size_t sent = 0;
  ~Connection() {
    sd_event_source_disable_unref(io);
    sd_event_source_disable_unref(timer);
    if (fd >= 0) close(fd);
  }
};

MetricsServer::MetricsServer(sd_event* loop, Page page) : loop_(loop), page_(std::move(page)) {}

MetricsServer::~MetricsServer() {
  connections_.clear();
  for (sd_event_source* s : listeners_) {
    int fd = sd_event_source_get_io_fd(s);
    sd_event_source_disable_unref(s);
    close(fd);
  }
  sd_event_source_disable_unref(textfile_timer_);
}

void MetricsServer::listen(const std::string& address) {
  sockaddr_storage sa;
  socklen_t len = 0;
  if (std::string why = parse_listen_address(address, &sa, &len); !why.empty())
    throw std::runtime_error("[metrics] listen = \"" + xfer::printable(address) + "\": " + why);
  int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("[metrics] listen: socket: " + std::string(strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0 || ::listen(fd, 128) != 0) {
    int err = errno;
    close(fd);
    throw std::runtime_error("[metrics] listen = \"" + xfer::printable(address) + "\": " + strerror(err) +
                             (err == EADDRINUSE ? " (another program listens there)" : ""));
  }
  serve(fd, "http://" + address + "/metrics");
}

void MetricsServer::serve(int listen_fd, const std::string& what) {
  fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
  sd_event_source* s = nullptr;
  int r = sd_event_add_io(loop_, &s, listen_fd, EPOLLIN, on_accept, this);
  if (r < 0) {
    close(listen_fd);
    throw std::runtime_error("metrics endpoint " + what + ": " + strerror(-r));
  }
  listeners_.push_back(s);
  endpoints_.push_back(what);
  log::info("metrics: serving {}", what);
}

// A new connection is read at once: a scraper's request is most often there
// already, and is answered before the next connection is taken.
int MetricsServer::on_accept(sd_event_source*, int fd, uint32_t, void* ud) {
  auto* self = static_cast<MetricsServer*>(ud);
  for (;;) {
    int c = accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) return 0;  // EAGAIN, or a connection gone before it was taken
    if (!self->make_room()) {
      close(c);  // every slot is answering a request: a scraper retries
      continue;
    }
    auto conn = std::make_unique<Connection>();
    conn->server = self, conn->fd = c;
    Connection* k = conn.get();
    if (sd_event_add_io(self->loop_, &conn->io, c, EPOLLIN, on_io, k) < 0 ||
        sd_event_add_time_relative(self->loop_, &conn->timer, CLOCK_MONOTONIC, kHeadTimeoutUs, 50000, on_timeout, k) < 0)
      continue;  // conn closes c
    self->connections_.push_back(std::move(conn));
    on_io(k->io, c, EPOLLIN, k);
  }
}

bool MetricsServer::make_room() {
  if (connections_.size() < kMaxConnections) return true;
  // connections_ is in the order they came: the first still reading its head
  // is the oldest such.
  for (const auto& k : connections_)
    if (k->out.empty()) {
      drop(k.get());
      return true;
    }
  return false;
}

int MetricsServer::on_timeout(sd_event_source*, uint64_t, void* ud) {
  auto* k = static_cast<Connection*>(ud);
  k->server->drop(k);
  return 0;
}

int MetricsServer::on_io(sd_event_source*, int cfd, uint32_t events, void* ud) {
  auto* k = static_cast<Connection*>(ud);
  MetricsServer* srv = k->server;
  if (k->out.empty()) {
    char buf[2048];
    bool ended = false;  // the client half-closed (or reset): what came is all there is
    for (;;) {
      ssize_t n = read(cfd, buf, sizeof buf);
      if (n > 0) {
        k->in.append(buf, size_t(n));
        if (k->in.size() > kMaxRequestBytes) {
          k->out = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
          break;
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      ended = n == 0 || errno != EAGAIN;
      break;
    }
    size_t end = metrics_request_end(k->in);
    if (k->out.empty() && end == std::string::npos) {
      if (ended) srv->drop(k);
      return 0;  // more to come, within the head's deadline
    }
    if (k->out.empty()) {
      k->out = metrics_http_response(k->in.substr(0, end), [srv] {
        ++srv->scrapes_;
        return srv->page_();
      });
    }
    // The head is whole: the answer has the rest of the connection's time.
    sd_event_source_set_time_relative(k->timer, kConnectionTimeoutUs);
    sd_event_source_set_io_events(k->io, EPOLLOUT);
    events = EPOLLOUT;
  }
  if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
    while (k->sent < k->out.size()) {
      ssize_t n = write(cfd, k->out.data() + k->sent, k->out.size() - k->sent);
      if (n > 0) {
        k->sent += size_t(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
      break;  // the scraper went away
    }
    srv->drop(k);
  }
  return 0;
}

void MetricsServer::drop(Connection* c) {
  auto it = std::find_if(connections_.begin(), connections_.end(), [c](const auto& p) { return p.get() == c; });
  if (it == connections_.end()) return;
  // Often called from the connection's own io or timer callback: sd-event
  // lets a source be unreferenced while it dispatches; the caller returns
  // at once and touches the connection no more.
  connections_.erase(it);
}

void MetricsServer::check_textfile(const std::string& path) {
  std::string dir = path.substr(0, path.rfind('/'));
  if (path.empty() || path[0] != '/' || dir.empty())
    throw std::runtime_error("[metrics] textfile = \"" + xfer::printable(path) + "\": expected an absolute path");
  try {
    xfer::require_trusted(dir, xfer::Trusted::Directory, "[metrics] textfile's directory");
    xfer::require_trusted(path, xfer::Trusted::File, "[metrics] textfile");
  } catch (const xfer::UntrustedPath& e) {
    throw std::runtime_error(e.what());
  }
}

void MetricsServer::textfile(const std::string& path, double interval_s) {
  check_textfile(path);
  textfile_ = path;
  textfile_interval_s_ = interval_s;
  write_textfile();
  sd_event_add_time_relative(
      loop_, &textfile_timer_, CLOCK_MONOTONIC, uint64_t(interval_s * 1e6), 100000,
      [](sd_event_source* s, uint64_t, void* ud) {
        auto* self = static_cast<MetricsServer*>(ud);
        self->write_textfile();
        sd_event_source_set_time_relative(s, uint64_t(self->textfile_interval_s_ * 1e6));
        return sd_event_source_set_enabled(s, SD_EVENT_ON);
      },
      this);
  endpoints_.push_back(path);
  log::info("metrics: written to {} every {:g} s", xfer::printable(path), interval_s);
}

void MetricsServer::write_textfile() {
  if (textfile_.empty()) return;
  // node_exporter reads *.prom only: the temporary name is never read.
  std::string tmp = textfile_ + ".tmp";
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  std::string page = page_();
  bool ok = fd >= 0;
  for (size_t off = 0; ok && off < page.size();) {
    ssize_t n = write(fd, page.data() + off, page.size() - off);
    if (n <= 0 && errno != EINTR) ok = false;
    if (n > 0) off += size_t(n);
  }
  if (fd >= 0) ok = fchmod(fd, 0644) == 0 && close(fd) == 0 && ok;
  if (ok) ok = rename(tmp.c_str(), textfile_.c_str()) == 0;
  if (!ok) {
    log::warn("metrics: cannot write {}: {}", xfer::printable(textfile_), strerror(errno));
    unlink(tmp.c_str());
  }
}

}  // namespace xferd
