#include "credentials_args.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <fmt/format.h>

#include "xfer/manifest.h"
#include "xfer/safe_open.h"
#include "xfer/text.h"

namespace xferd {

namespace {

constexpr size_t kMaxValue = 1 << 20;  // a netrc, a certificate chain: far less

Refusal bad(const std::string& why) { return Refusal(err::kInvalidArguments, "credentials: " + why + "; nothing fetched"); }

}  // namespace

// A descriptor the caller passed: read to its end at once, never waiting, at
// most kMaxValue bytes, only a regular file on a file system no process
// serves, a pipe (or FIFO) or a socket. It runs on the event loop, so no read
// may block, whatever the caller does meanwhile: a socket is read with
// MSG_DONTWAIT (its SO_RCVLOWAT cannot make that wait), a pipe through a
// non-blocking open file description of its own (reopened through
// /proc/self/fd, so the caller's description keeps its flags and a reader that
// drains the pipe between two reads costs an EAGAIN, not a hang), and a file
// on FUSE (whose reads wait on the process that serves it) is refused. A pipe
// must already hold all it will give: its writer closed.
std::string read_descriptor(int fd, const std::string& key) {
  struct stat st;
  if (fstat(fd, &st) != 0) throw bad(fmt::format("{}: the descriptor cannot be read: {}", key, strerror(errno)));
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
    throw bad(fmt::format("{}: the descriptor is a {}, not a file or a pipe", key, xfer::file_kind(st.st_mode)));
  if (S_ISREG(st.st_mode)) {
    struct statfs fs;
    if (fstatfs(fd, &fs) == 0 && fs.f_type == FUSE_SUPER_MAGIC)
      throw bad(fmt::format("{}: the file is on a FUSE file system, whose reads wait on the process serving it: give "
                            "a file on a local file system, or a pipe",
                            key));
  }
  int own = -1;  // a pipe's non-blocking description of xferd's own
  if (S_ISFIFO(st.st_mode)) {
    own = open(fmt::format("/proc/self/fd/{}", fd).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (own < 0) throw bad(fmt::format("{}: the pipe cannot be read: {}", key, strerror(errno)));
  }
  auto closer = [own] {
    if (own >= 0) close(own);
  };
  std::string out;
  auto fail = [&](const std::string& why) {
    closer();
    xfer::wipe(out);
    return bad(fmt::format("{}: {}", key, why));
  };
  char buf[16384];
  for (;;) {
    ssize_t n;
    if (S_ISSOCK(st.st_mode))
      n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    else if (own >= 0)
      n = read(own, buf, sizeof buf);
    else
      n = pread(fd, buf, sizeof buf, off_t(out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      throw fail("the descriptor had no end ready (a pipe or socket still open for writing?): give a file, or a "
                 "pipe whose writer has closed it");
    if (n < 0) throw fail(fmt::format("reading the descriptor: {}", strerror(errno)));
    if (n == 0) break;
    out.append(buf, size_t(n));
    explicit_bzero(buf, sizeof buf);
    if (out.size() > kMaxValue) throw fail(fmt::format("more than {} bytes", kMaxValue));
  }
  closer();
  return out;
}

namespace {

// A token or a password read from a file ends in a newline the secret does not have.
std::string_view one_line(std::string_view v) {
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.remove_suffix(1);
  return v;
}

bool header_token(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (unsigned char c : n)
    if (!(std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", c))) return false;
  return true;
}

// Headers that frame the request: a caller's file does not set them.
bool framing_header(std::string_view n) {
  static const char* const kFraming[] = {"host", "content-length", "transfer-encoding", "range", "connection",
                                         "upgrade", "te", "expect", "proxy-authorization", "cookie"};
  for (const char* f : kFraming)
    if (n.size() == strlen(f) && strncasecmp(n.data(), f, n.size()) == 0) return true;
  return false;
}

void take_headers(CredentialArgs& a, std::string_view text) {
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line[0] == '#') continue;
    size_t colon = line.find(':');
    std::string_view name = line.substr(0, colon);
    if (colon == std::string_view::npos || !header_token(name))
      throw bad(fmt::format("headers: line {} is not 'Name: value' with a header name", line_no));
    if (framing_header(name))
      throw bad(fmt::format("headers: line {} sets {}, which xferd sets itself", line_no, xfer::printable(name)));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    for (unsigned char c : value)
      if (c < 0x20 && c != '\t') throw bad(fmt::format("headers: line {} holds a control character", line_no));
    if (value.empty()) throw bad(fmt::format("headers: line {} has no value", line_no));
    if (a.creds.headers.size() >= 32) throw bad("headers: more than 32");
    a.creds.headers.emplace_back(std::string(name), xfer::Secret(value));
  }
}

bool has_pem(std::string_view v, const char* kind) { return v.find(std::string("-----BEGIN ") + kind) != std::string_view::npos; }

void take(CredentialArgs& a, const std::string& key, char type, std::string& v) {
  if (key == "allow_downgrade") {
    if (type != 'b') throw bad("allow_downgrade takes a boolean");
    a.allow_downgrade = v == "1";
    return;
  }
  if (type != 's') throw bad(fmt::format("{} takes a string", xfer::shown(key, 64)));
  std::string_view line = one_line(v);
  if (key == "origin") {
    a.origin = v;
  } else if (key == "bearer_token") {
    if (line.empty() || line.find_first_of("\r\n") != std::string_view::npos) throw bad("bearer_token: empty, or more than one line");
    a.creds.bearer = xfer::Secret(line);
  } else if (key == "user") {
    if (v.find_first_of("\r\n:") != std::string::npos) throw bad("user: holds a ':' or a line break");
    a.creds.user = v;
  } else if (key == "password") {
    a.creds.password = xfer::Secret(line);
  } else if (key == "auth") {
    if (v == "basic") a.creds.auth = xfer::AuthKind::Basic;
    else if (v == "digest") a.creds.auth = xfer::AuthKind::Digest;
    else if (v == "any") a.creds.auth = xfer::AuthKind::Any;
    else throw bad("auth: basic, digest or any (NTLM and Negotiate are not offered)");
  } else if (key == "headers") {
    take_headers(a, v);
  } else if (key == "client_cert") {
    if (!has_pem(v, "CERTIFICATE")) throw bad("client_cert: no PEM certificate in it");
    a.creds.client_cert = xfer::Secret(v);
  } else if (key == "client_key") {
    if (!has_pem(v, "") || v.find("PRIVATE KEY") == std::string::npos) throw bad("client_key: no PEM private key in it");
    a.creds.client_key = xfer::Secret(v);
  } else if (key == "key_passphrase") {
    a.creds.key_passphrase = xfer::Secret(line);
  } else if (key == "netrc") {
    try {
      a.netrc = xfer::parse_netrc(v);
    } catch (const xfer::CredentialError& e) {
      throw bad(e.what());
    }
  } else if (key == "aws_sigv4") {
    // aws:amz:REGION:SERVICE, each part a plain word (curl's provider string).
    size_t parts = 1;
    for (char c : v) {
      if (c == ':') ++parts;
      else if (!std::isalnum((unsigned char)c) && c != '-' && c != '_') throw bad("aws_sigv4: PROVIDER[:PROVIDER2[:REGION[:SERVICE]]], words only");
    }
    if (v.empty() || parts > 4) throw bad("aws_sigv4: PROVIDER[:PROVIDER2[:REGION[:SERVICE]]]");
    a.creds.sigv4 = v;
  } else if (key == "aws_keys") {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == line.size())
      throw bad("aws_keys: ACCESS_KEY_ID:SECRET_ACCESS_KEY");
    a.creds.user = std::string(line.substr(0, colon));
    a.creds.password = xfer::Secret(line.substr(colon + 1));
  } else if (key == "proxy") {
    if (std::string why = xfer::check_url(v); !why.empty()) throw bad("proxy: " + why);
    a.proxy.url = v;
  } else if (key == "proxy_user") {
    if (v.find_first_of("\r\n:") != std::string::npos) throw bad("proxy_user: holds a ':' or a line break");
    a.proxy.user = v;
  } else if (key == "proxy_password") {
    a.proxy.password = xfer::Secret(line);
  } else if (key == "no_proxy") {
    if (v.find_first_of(" \r\n") != std::string::npos) throw bad("no_proxy: hosts separated by commas, no spaces");
    a.proxy.no_proxy = v;
  } else {
    throw bad(fmt::format("unknown key '{}'; known: origin, bearer_token, user, password, auth, headers, client_cert, "
                          "client_key, key_passphrase, netrc, aws_sigv4, aws_keys, proxy, proxy_user, proxy_password, "
                          "no_proxy, allow_downgrade",
                          xfer::shown(key, 64)));
  }
}

void finish(CredentialArgs& a) {
  const xfer::Credentials& c = a.creds;
  if (!c.sigv4.empty() && (c.user.empty() || c.password.empty())) throw bad("aws_sigv4 needs aws_keys");
  if (c.sigv4.empty() && !c.user.empty() && c.password.empty() && c.bearer.empty())
    throw bad("user without a password");
  if (!c.bearer.empty() && (!c.password.empty() || !c.sigv4.empty()))
    throw bad("a bearer token and a password (or SigV4) for one origin: give one");
  if (c.client_key.empty() != c.client_cert.empty()) throw bad("client_cert and client_key go together");
  if (c.key_passphrase.empty() && c.client_key.view().find("ENCRYPTED") != std::string_view::npos)
    throw bad("client_key is encrypted: give its key_passphrase");
  if ((!a.proxy.user.empty() || !a.proxy.password.empty()) && a.proxy.url.empty()) throw bad("proxy_user without a proxy");
}

}  // namespace

CredentialArgs credentials_from_fields(const std::vector<CredentialField>& fields) {
  CredentialArgs a;
  for (CredentialField f : fields) {
    take(a, f.key, f.type, f.value);
    xfer::wipe(f.value);
  }
  finish(a);
  return a;
}

CredentialArgs read_credentials(sd_bus_message* m) {
  CredentialArgs a;
  check(sd_bus_message_enter_container(m, 'a', "{sv}"), "credentials");
  for (size_t n = 0;; ++n) {
    int r = sd_bus_message_enter_container(m, 'e', "sv");
    check(r, "credentials");
    if (r == 0) break;
    if (n >= 64) throw bad("more than 64 entries");
    const char* key = nullptr;
    check(sd_bus_message_read(m, "s", &key), "credentials key");
    std::string k = key;
    std::string vt = enter_variant(m, "credentials value");
    std::string value;
    char as = 's';
    if (vt == "s") {
      const char* s = nullptr;
      check(sd_bus_message_read_basic(m, 's', &s), "credentials value");
      value = s;
    } else if (vt == "h") {
      int fd = -1;
      check(sd_bus_message_read_basic(m, 'h', &fd), "credentials value");
      value = read_descriptor(fd, k);
    } else if (vt == "ay") {
      const void* p = nullptr;
      size_t len = 0;
      check(sd_bus_message_read_array(m, 'y', &p, &len), "credentials value");
      value.assign(static_cast<const char*>(p), len);
    } else if (vt == "b") {
      int b = 0;
      check(sd_bus_message_read_basic(m, 'b', &b), "credentials value");
      value = b ? "1" : "0";
      as = 'b';
    } else {
      throw bad(fmt::format("{}: a string, bytes, a file descriptor or a boolean, not '{}'", xfer::shown(k, 64),
                            xfer::printable(vt)));
    }
    if (value.find('\0') != std::string::npos) {
      xfer::wipe(value);
      throw bad(fmt::format("{}: holds a NUL byte", xfer::shown(k, 64)));
    }
    take(a, k, as, value);
    xfer::wipe(value);
    check(sd_bus_message_exit_container(m), "credentials value");
    check(sd_bus_message_exit_container(m), "credentials");
  }
  check(sd_bus_message_exit_container(m), "credentials");
  finish(a);
  return a;
}

std::shared_ptr<const xfer::JobCredentials> bind_credentials(CredentialArgs a, const std::vector<std::string>& origins) {
  auto out = std::make_shared<xfer::JobCredentials>();
  out->allow_downgrade = a.allow_downgrade;
  out->proxy = std::move(a.proxy);
  if (!a.creds.empty()) {
    std::string origin;
    if (!a.origin.empty()) {
      origin = xfer::url_origin(a.origin);
      if (origin.empty()) throw bad("origin: not a URL");
    } else if (origins.size() == 1) {
      origin = origins[0];
    } else {
      throw bad(fmt::format("the job fetches from {} origins: say which one they are for (origin)", origins.size()));
    }
    bool known = false;
    for (const std::string& o : origins) known = known || strcasecmp(o.c_str(), origin.c_str()) == 0;
    if (!known) throw bad("origin: " + xfer::shown_url(origin) + " is not an origin of the job's entries");
    a.creds.origin = origin;
    out->origins.push_back(std::move(a.creds));
  }
  xfer::bind_netrc(*out, a.netrc, origins);
  if (!a.netrc.empty() && out->origins.empty() && out->proxy.url.empty())
    throw bad("netrc: it names none of the job's hosts, and has no default entry");
  return out;
}

}  // namespace xferd
