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

std::string metrics_http_response(const std::string& head, const std::function<std::string()>& page) {
  auto answer = [](const char* status, const std::string& type, const std::string& body, bool with_body,
                   const char* extra = "") {
    return fmt::format("HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n{}", status,
                       type, body.size(), extra, with_body ? body : std::string());
  };
  size_t eol = head.find_first_of("\r\n");
  std::string line = head.substr(0, eol);
  size_t sp1 = line.find(' '), sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0)
    return answer("400 Bad Request", "text/plain", "not an HTTP/1.x request\n", true);
  std::string method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  bool head_only = method == "HEAD";
  if (method != "GET" && !head_only)
    return answer("405 Method Not Allowed", "text/plain", "xferd's metrics are read with GET\n", true, "Allow: GET, HEAD\r\n");
  std::string path = target.substr(0, target.find('?'));
  if (path != "/metrics")
    return answer("404 Not Found", "text/plain", "xferd serves its metrics at /metrics\n", !head_only);
  return answer("200 OK", kMetricsContentType, page(), !head_only);
}

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
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0 || ::listen(fd, 16) != 0) {
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

int MetricsServer::on_accept(sd_event_source*, int fd, uint32_t, void* ud) {
  auto* self = static_cast<MetricsServer*>(ud);
  for (;;) {
    int c = accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) return 0;  // EAGAIN, or a connection gone before it was taken
    if (self->connections_.size() >= kMaxConnections) {
      close(c);  // a scraper retries; a flood holds no more than this
      continue;
    }
    auto conn = std::make_unique<Connection>();
    conn->server = self, conn->fd = c;
    auto on_io = [](sd_event_source*, int cfd, uint32_t events, void* cud) -> int {
      auto* k = static_cast<Connection*>(cud);
      MetricsServer* srv = k->server;
      if (k->out.empty()) {
        char buf[2048];
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
          if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            srv->drop(k);
            return 0;
          }
          break;
        }
        size_t end = k->in.find("\r\n\r\n");
        if (end == std::string::npos) end = k->in.find("\n\n");
        if (k->out.empty() && end == std::string::npos) return 0;  // more to come
        if (k->out.empty()) {
          k->out = metrics_http_response(k->in.substr(0, end), [srv] {
            ++srv->scrapes_;
            return srv->page_();
          });
        }
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
    };
    if (sd_event_add_io(self->loop_, &conn->io, c, EPOLLIN, on_io, conn.get()) < 0) continue;
    sd_event_add_time_relative(
        self->loop_, &conn->timer, CLOCK_MONOTONIC, kConnectionTimeoutUs, 100000,
        [](sd_event_source*, uint64_t, void* cud) {
          auto* k = static_cast<Connection*>(cud);
          k->server->drop(k);
          return 0;
        },
        conn.get());
    self->connections_.push_back(std::move(conn));
  }
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
