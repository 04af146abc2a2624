#include "flaky_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <sstream>

namespace xtest {
namespace {

bool send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

void reset_close(int fd) {
  linger l{1, 0};  // close() now sends RST
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  close(fd);
}

// A request header's value (case-insensitive name), "" when absent.
std::string header(const std::string& head, const std::string& name) {
  size_t pos = head.find("\r\n");
  while (pos != std::string::npos) {
    size_t start = pos + 2, end = head.find("\r\n", start);
    std::string line = head.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (line.size() > name.size() && line[name.size()] == ':' && strncasecmp(line.c_str(), name.c_str(), name.size()) == 0) {
      std::string v = line.substr(name.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
      return v;
    }
    pos = end;
  }
  return "";
}

std::string hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) out += d[p[i] >> 4], out += d[p[i] & 15];
  return out;
}

std::string digest_hex(const EVP_MD* md, const std::string& s) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(s.data(), s.size(), out, &n, md, nullptr);
  return hex(out, n);
}

std::string hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()), reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n);
  return std::string(reinterpret_cast<char*>(out), n);
}

// key="value", key=value, ... after the scheme word.
std::map<std::string, std::string> auth_params(const std::string& v) {
  std::map<std::string, std::string> out;
  size_t i = v.find(' ');
  while (i != std::string::npos && i < v.size()) {
    while (i < v.size() && (v[i] == ' ' || v[i] == ',')) ++i;
    size_t eq = v.find('=', i);
    if (eq == std::string::npos) break;
    std::string k = v.substr(i, eq - i), val;
    i = eq + 1;
    if (i < v.size() && v[i] == '"') {
      size_t close = v.find('"', i + 1);
      val = v.substr(i + 1, close - i - 1);
      i = close == std::string::npos ? v.size() : close + 1;
    } else {
      size_t comma = v.find(',', i);
      val = v.substr(i, comma - i);
      i = comma;
    }
    out[k] = val;
  }
  return out;
}

constexpr const char* kNonce = "xfer-test-nonce-5f1e";

bool digest_ok(const std::string& head, const std::string& method, const std::string& user, const std::string& pw) {
  std::string a = header(head, "Authorization");
  if (a.rfind("Digest ", 0) != 0) return false;
  auto p = auth_params(a);
  if (p["username"] != user || p["nonce"] != kNonce || p["qop"] != "auth") return false;
  std::string ha1 = digest_hex(EVP_md5(), user + ":" + p["realm"] + ":" + pw);
  std::string ha2 = digest_hex(EVP_md5(), method + ":" + p["uri"]);
  return p["response"] == digest_hex(EVP_md5(), ha1 + ":" + kNonce + ":" + p["nc"] + ":" + p["cnonce"] + ":auth:" + ha2);
}

// AWS SigV4 as a server checks it: the canonical request rebuilt from the
// request itself and the headers it says it signed.
bool sigv4_ok(const std::string& head, const std::string& method, const std::string& path, const std::string& access,
              const std::string& secret) {
  std::string a = header(head, "Authorization");
  if (a.rfind("AWS4-HMAC-SHA256 ", 0) != 0) return false;
  auto p = auth_params(a);
  std::string cred = p["Credential"];  // ACCESS/DATE/REGION/SERVICE/aws4_request
  if (cred.rfind(access + "/", 0) != 0) return false;
  std::string scope = cred.substr(access.size() + 1);
  std::vector<std::string> parts;
  std::stringstream ss(scope);
  for (std::string x; std::getline(ss, x, '/');) parts.push_back(x);
  if (parts.size() != 4 || parts[3] != "aws4_request") return false;
  std::string canonical_headers, signed_headers = p["SignedHeaders"];
  std::stringstream sh(signed_headers);
  for (std::string name; std::getline(sh, name, ';');) canonical_headers += name + ":" + header(head, name) + "\n";
  std::string date = header(head, "x-amz-date");
  std::string payload = header(head, "x-amz-content-sha256");
  if (payload.empty()) payload = digest_hex(EVP_sha256(), "");
  std::string path_only = path.substr(0, path.find('?'));
  std::string query = path.find('?') == std::string::npos ? "" : path.substr(path.find('?') + 1);
  std::string canonical = method + "\n" + path_only + "\n" + query + "\n" + canonical_headers + "\n" + signed_headers +
                          "\n" + payload;
  std::string to_sign = "AWS4-HMAC-SHA256\n" + date + "\n" + scope + "\n" + digest_hex(EVP_sha256(), canonical);
  std::string k = hmac("AWS4" + secret, parts[0]);
  k = hmac(k, parts[1]);
  k = hmac(k, parts[2]);
  k = hmac(k, "aws4_request");
  std::string sig = hmac(k, to_sign);
  return p["Signature"] == hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
}

}  // namespace

FlakyServer::FlakyServer(std::string content)
    : current_(std::make_shared<const Version>(Version{std::move(content), 1})) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  listen(listen_fd_, 64);
  socklen_t len = sizeof a;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  acceptor_ = std::thread([this] {
    for (;;) {
      int c = accept(listen_fd_, nullptr, nullptr);
      if (c < 0 || stop_) {
        if (c >= 0) close(c);
        return;
      }
      timeval tv{5, 0};
      setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::lock_guard<std::mutex> g(mu_);
      workers_.emplace_back([this, c] { serve(c); });
    }
  });
}

FlakyServer::~FlakyServer() {
  stop_ = true;
  shutdown(listen_fd_, SHUT_RDWR);
  close(listen_fd_);
  acceptor_.join();
  std::vector<std::thread> w;
  {
    std::lock_guard<std::mutex> g(mu_);
    w.swap(workers_);
  }
  for (auto& t : w) t.join();
}

void FlakyServer::replace(std::string content, bool cut) {
  int next = std::atomic_load(&current_)->number + 1;
  std::atomic_store(&current_, std::shared_ptr<const Version>(std::make_shared<const Version>(Version{std::move(content), next})));
  if (cut) cut_below_ = next;
}

std::vector<std::string> FlakyServer::requests() {
  std::lock_guard<std::mutex> g(mu_);
  return log_;
}

std::vector<std::string> FlakyServer::heads() {
  std::lock_guard<std::mutex> g(mu_);
  return heads_;
}

int FlakyServer::hits(const std::string& path) {
  std::lock_guard<std::mutex> g(mu_);
  return ++hits_[path];
}

void FlakyServer::serve(int fd) {
  std::string buf;
  char tmp[8192];
  for (;;) {
    size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = recv(fd, tmp, sizeof tmp, 0);
      if (n <= 0) {
        close(fd);
        return;
      }
      buf.append(tmp, size_t(n));
    }
    std::string head = buf.substr(0, end);
    buf.erase(0, end + 4);
    std::string method = head.substr(0, head.find(' '));
    size_t p1 = head.find(' ') + 1;
    std::string path = head.substr(p1, head.find(' ', p1) - p1);
    std::shared_ptr<const Version> held = std::atomic_load(&current_);
    const int ver = held->number;
    const std::string& body = held->content;  // this response's version, whatever replace() does meanwhile
    std::string etag = "\"v" + std::to_string(ver) + "\"";
    uint64_t a = 0, b = body.size() - 1;
    bool ranged = false;
    size_t r = head.find("\r\nRange: bytes=");
    if (r != std::string::npos) {
      ranged = true;
      std::string spec = head.substr(r + 15, head.find("\r\n", r + 2) - r - 15);
      a = std::stoull(spec.substr(0, spec.find('-')));
      std::string last = spec.substr(spec.find('-') + 1);
      if (!last.empty()) b = std::min<uint64_t>(std::stoull(last), body.size() - 1);
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      log_.push_back(method + " " + path + " " + (ranged ? std::to_string(a) + "-" + std::to_string(b) : "-"));
      heads_.push_back(head);
    }
    std::string kind = path.substr(1, path.find('/', 1) - 1);
    int n = method == "GET" ? hits(path) : 0;
    if (kind == "norange") ranged = false, a = 0, b = body.size() - 1;
    // If-Range (RFC 9110 §13.1.5): the range only of the version it names.
    std::string if_range = header(head, "If-Range");
    if (validators && ranged && !if_range.empty() && (if_range != etag || kind == "ignore-if-range" || kind == "noetag" || kind == "weak"))
      ranged = false, a = 0, b = body.size() - 1;
    if (method == "GET" && kind == "fail-twice" && n <= 2) {
      std::string resp = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n";
      if (!send_all(fd, resp.data(), resp.size())) break;
      continue;
    }
    if (kind == "to") {  // /to/PORT/rest: another origin
      size_t slash = path.find('/', 4);
      std::string resp = "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:" + path.substr(4, slash - 4) +
                         path.substr(slash) + "\r\nContent-Length: 0\r\n\r\n";
      if (!send_all(fd, resp.data(), resp.size())) break;
      continue;
    }
    if (kind == "digest" || kind == "sigv4") {
      bool ok = kind == "digest" ? digest_ok(head, method, digest_user, digest_password)
                                 : sigv4_ok(head, method, path, sigv4_access, sigv4_secret);
      (ok ? auth_ok : auth_refused)++;
      if (!ok) {
        std::string resp = kind == "digest" ? std::string("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Digest realm=\"xfer\", "
                                                          "nonce=\"") + kNonce + "\", qop=\"auth\", algorithm=MD5\r\n"
                                            : std::string(header(head, "Authorization").empty() ? "HTTP/1.1 401 Unauthorized\r\n"
                                                                                              : "HTTP/1.1 403 Forbidden\r\n");
        resp += "Content-Length: 0\r\n\r\n";
        if (!send_all(fd, resp.data(), resp.size())) break;
        continue;
      }
    }
    if (kind == "loop") {  // a redirect to itself, forever
      std::string resp = "HTTP/1.1 302 Found\r\nLocation: " + path + "\r\nContent-Length: 0\r\n\r\n";
      if (!send_all(fd, resp.data(), resp.size())) break;
      continue;
    }
    uint64_t len = b - a + 1;
    uint64_t cr_a = a, cr_b = b;
    if (kind == "wrongrange" && ranged) cr_a = a + 1;  // a Content-Range for bytes not asked for
    if (kind == "overrange" && ranged) cr_b = std::min<uint64_t>(b + 4096, body.size() - 1), len = cr_b - a + 1;
    std::string resp = std::string("HTTP/1.1 ") + (ranged ? "206 Partial Content" : "200 OK") + "\r\n";
    if (kind == "endless") resp += "Connection: close\r\n";  // no length: the body ends when the connection does
    else resp += "Content-Length: " + std::to_string(len) + "\r\n";
    if (kind != "norange") resp += "Accept-Ranges: bytes\r\n";
    if (validators && kind == "weak") resp += "ETag: W/" + etag + "\r\n";
    else if (validators && kind != "noetag") resp += "ETag: " + etag + "\r\n";
    if (kind == "gzip") resp += "Content-Encoding: gzip\r\n";
    if (kind == "bigheaders")
      for (int i = 0; i < 100; ++i) resp += "X-Pad-" + std::to_string(i) + ": " + std::string(1024, 'p') + "\r\n";
    if (ranged)
      resp += "Content-Range: bytes " + std::to_string(cr_a) + "-" + std::to_string(cr_b) + "/" +
              std::to_string(body.size()) + "\r\n";
    resp += "\r\n";
    if (!send_all(fd, resp.data(), resp.size())) break;
    if (method == "HEAD") continue;
    if (kind == "endless") {  // the content again and again (bounded, so a broken client cannot keep it busy)
      for (int i = 0; i < 256 && !stop_; ++i) {
        if (!send_all(fd, body.data() + a, body.size() - a)) break;
        body_bytes += body.size() - a;
        a = 0;
      }
      break;
    }
    if (kind == "overrange" || kind == "overlong") {  // more than asked for / more than Content-Length
      std::string more = body.substr(a, len) + (kind == "overlong" ? std::string(4096, 'X') : std::string());
      send_all(fd, more.data(), more.size());
      break;
    }
    if (kind == "trickle") {
      int one = 1;  // each write its own segment, as on a WAN path
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      bool sent = true;
      for (uint64_t at = 0; at < len && sent && !stop_; at += 1448) {
        if (ver < cut_below_) {  // the server moved on to a newer version
          reset_close(fd);
          return;
        }
        sent = send_all(fd, body.data() + a + at, std::min<uint64_t>(1448, len - at));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (!sent) break;
      body_bytes += len;
      continue;
    }
    bool once_bad = (kind == "reset-once" || kind == "truncate-once") && n == 1;
    uint64_t send_len = once_bad ? len / 2 : len;
    if (kind == "stall") send_len = n == 1 ? len / 2 : 0;  // then never a byte more: retries make no progress
    if (kind == "stall-once" && n == 1) send_len = len / 2;
    if (!send_all(fd, body.data() + a, send_len)) break;
    body_bytes += send_len;
    if (kind == "stall" || (kind == "stall-once" && n == 1)) {  // silence on an open connection
      for (int i = 0; i < 600 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      break;
    }
    if (once_bad) {
      if (kind == "reset-once") reset_close(fd);
      else close(fd);
      return;
    }
  }
  close(fd);
}

}  // namespace xtest
