// Secrets in memory, netrc, per-origin credentials and redirect targets
// (credentials.h). Job::Impl::new_request puts them on each request.
#include "xfer/credentials.h"

#include <curl/curl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "xfer/log.h"
#include "xfer/manifest.h"
#include "xfer/text.h"

namespace xfer {

// ---- Secret -------------------------------------------------------------

Secret::Secret(std::string_view bytes) {
  if (bytes.empty()) return;
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  mapped_ = (bytes.size() + 1 + page - 1) / page * page;
  void* m = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  madvise(m, mapped_, MADV_DONTDUMP);    // never in a core file
  madvise(m, mapped_, MADV_WIPEONFORK);  // a forked child (the caller checks) sees zeros
  mlock(m, mapped_);                   // never in swap, when RLIMIT_MEMLOCK allows
  p_ = static_cast<char*>(m);
  memcpy(p_, bytes.data(), bytes.size());
  n_ = bytes.size();
}

Secret::Secret(Secret&& o) noexcept : p_(o.p_), n_(o.n_), mapped_(o.mapped_) {
  o.p_ = nullptr;
  o.n_ = o.mapped_ = 0;
}

Secret& Secret::operator=(const Secret& o) {
  if (this != &o) *this = Secret(o.view());
  return *this;
}

Secret& Secret::operator=(Secret&& o) noexcept {
  if (this != &o) {
    release();
    p_ = o.p_;
    n_ = o.n_;
    mapped_ = o.mapped_;
    o.p_ = nullptr;
    o.n_ = o.mapped_ = 0;
  }
  return *this;
}

Secret::~Secret() { release(); }

void Secret::release() noexcept {
  if (!p_) return;
  explicit_bzero(p_, mapped_);
  munlock(p_, mapped_);
  munmap(p_, mapped_);
  p_ = nullptr;
  n_ = mapped_ = 0;
}

void wipe(std::string& s) noexcept {
  if (!s.empty()) explicit_bzero(s.data(), s.size());
  s.clear();
}

// ---- netrc --------------------------------------------------------------

namespace {

// The next token of netrc text: white space separates, "..." quotes (with
// \" and \\ inside). false at the end.
bool next_token(std::string_view& t, std::string& out) {
  out.clear();
  size_t i = 0;
  while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
  if (i == t.size()) {
    t = {};
    return false;
  }
  if (t[i] == '"') {
    ++i;
    bool closed = false;
    for (; i < t.size(); ++i) {
      if (t[i] == '\\' && i + 1 < t.size()) {
        out += t[++i];
      } else if (t[i] == '"') {
        ++i;
        closed = true;
        break;
      } else {
        out += t[i];
      }
    }
    if (!closed) throw CredentialError("netrc: a quoted string is not closed");
  } else {
    while (i < t.size() && !std::isspace(static_cast<unsigned char>(t[i]))) out += t[i++];
  }
  t.remove_prefix(i);
  return true;
}

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower((unsigned char)x) == std::tolower((unsigned char)y); });
}

std::string host_of(std::string_view origin) {
  size_t s = origin.find("://");
  std::string_view rest = s == std::string_view::npos ? origin : origin.substr(s + 3);
  size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && rest.find(']', colon) == std::string_view::npos) rest = rest.substr(0, colon);
  return std::string(rest);
}

}  // namespace

std::vector<NetrcEntry> parse_netrc(std::string_view text) {
  if (text.size() > 1 << 20) throw CredentialError("netrc: longer than 1 MiB");
  std::vector<NetrcEntry> out;
  std::string tok, value;
  NetrcEntry* cur = nullptr;
  while (next_token(text, tok)) {
    if (tok == "machine") {
      if (!next_token(text, value)) throw CredentialError("netrc: 'machine' without a host name");
      out.emplace_back();
      cur = &out.back();
      cur->machine = value;
    } else if (tok == "default") {
      out.emplace_back();
      cur = &out.back();
      cur->is_default = true;
    } else if (tok == "login" || tok == "password" || tok == "account") {
      if (!cur) throw CredentialError("netrc: '" + tok + "' before any 'machine' or 'default'");
      if (!next_token(text, value)) throw CredentialError("netrc: '" + tok + "' without a value");
      if (tok == "login") cur->login = value;
      else if (tok == "password") cur->password = Secret(value);
      wipe(value);
    } else if (tok == "macdef") {
      // A macro runs to the next empty line.
      size_t end = text.find("\n\n");
      text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 2);
    } else {
      wipe(tok);
      throw CredentialError("netrc: an unknown keyword after " + std::to_string(out.size()) +
                            " entries (not shown: it may be a secret); netrc knows machine, default, login, password, "
                            "account and macdef");
    }
  }
  wipe(tok);
  return out;
}

void bind_netrc(JobCredentials& c, const std::vector<NetrcEntry>& entries, const std::vector<std::string>& origins) {
  for (const std::string& origin : origins) {
    if (c.find(origin)) continue;  // credentials given for it explicitly win
    std::string host = host_of(origin);
    const NetrcEntry* hit = nullptr;
    for (const NetrcEntry& e : entries)
      if (!e.is_default && iequal(e.machine, host)) {
        hit = &e;
        break;
      }
    if (!hit)
      for (const NetrcEntry& e : entries)
        if (e.is_default) {
          hit = &e;
          break;
        }
    if (!hit || (hit->login.empty() && hit->password.empty())) continue;
    Credentials k;
    k.origin = origin;
    k.user = hit->login;
    k.password = hit->password;
    c.origins.push_back(std::move(k));
  }
}

// ---- per origin -----------------------------------------------------------

const char* to_string(AuthKind k) {
  switch (k) {
    case AuthKind::Basic: return "basic";
    case AuthKind::Digest: return "digest";
    case AuthKind::Any: return "basic or digest";
  }
  return "?";
}

bool Credentials::empty() const {
  return user.empty() && password.empty() && bearer.empty() && headers.empty() && client_cert.empty() &&
         client_key.empty() && sigv4.empty();
}

std::string Credentials::describe() const {
  std::vector<std::string> kinds;
  if (!bearer.empty()) kinds.push_back("bearer token");
  if (!sigv4.empty()) kinds.push_back("SigV4 (" + sigv4 + ")");
  else if (!user.empty() || !password.empty()) kinds.push_back(std::string("user and password (") + to_string(auth) + ")");
  for (const auto& [name, _] : headers) kinds.push_back("header " + name);
  if (!client_cert.empty()) kinds.push_back("client certificate");
  std::string s;
  for (const std::string& k : kinds) s += (s.empty() ? "" : ", ") + k;
  return s.empty() ? "nothing" : s;
}

size_t JobCredentials::secret_bytes() const {
  size_t n = proxy.password.mapped_bytes();
  for (const Credentials& c : origins) {
    n += c.password.mapped_bytes() + c.bearer.mapped_bytes() + c.client_cert.mapped_bytes() +
         c.client_key.mapped_bytes() + c.key_passphrase.mapped_bytes();
    for (const auto& [_, v] : c.headers) n += v.mapped_bytes();
  }
  return n;
}

const Credentials* JobCredentials::find(std::string_view origin) const {
  for (const Credentials& c : origins)
    if (iequal(c.origin, origin)) return &c;
  return nullptr;
}

std::string JobCredentials::describe() const {
  std::string s;
  for (const Credentials& c : origins) s += (s.empty() ? "" : "; ") + c.describe() + " for " + c.origin;
  if (!proxy.url.empty())
    s += (s.empty() ? "" : "; ") + std::string("proxy ") + shown_url(proxy.url) + (proxy.user.empty() ? "" : " with a user");
  return s.empty() ? "none" : s;
}

// ---- redirects --------------------------------------------------------------

Redirect redirect_target(const std::string& from, const std::string& location, bool allow_downgrade) {
  Redirect out;
  CURLU* u = curl_url();
  if (!u) {
    out.refused = "out of memory";
    return out;
  }
  char* abs = nullptr;
  // Relative locations resolve against the URL that was asked.
  if (curl_url_set(u, CURLUPART_URL, from.c_str(), 0) != CURLUE_OK ||
      curl_url_set(u, CURLUPART_URL, location.c_str(), CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_URL, &abs, 0) != CURLUE_OK) {
    curl_url_cleanup(u);
    out.refused = "the Location is not a URL";
    return out;
  }
  std::string target(abs);
  curl_free(abs);
  curl_url_cleanup(u);
  if (std::string why = check_url(target); !why.empty()) {
    out.refused = why;
    return out;
  }
  auto https = [](const std::string& s) { return s.size() > 6 && iequal(std::string_view(s).substr(0, 6), "https:"); };
  if (https(from) && !https(target) && !allow_downgrade) {
    out.refused = "an https URL redirected to http (refused unless the job allows it: allow_downgrade)";
    return out;
  }
  out.url = std::move(target);
  return out;
}

void protect_process_memory() {
  rlimit none{0, 0};
  bool limited = setrlimit(RLIMIT_CORE, &none) == 0;
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || !limited)
    log::warn("could not turn core dumps off (PR_SET_DUMPABLE, RLIMIT_CORE): {}", strerror(errno));
  else log::info("core dumps off: this process holds its callers' credentials");
}

}  // namespace xfer
