// A job's credentials: what its owner gave for the origins it fetches from
// (a bearer token, a user and password, secret headers, a client
// certificate, netrc entries, S3 SigV4 keys) and the proxy it goes through.
//
// The rules every request follows (Job::Impl::new_request, redirects in
// redirect_target below):
// - credentials go only to the origin (scheme, host, port) they were given
//   for; a redirect to another origin carries none of them;
// - an https URL never redirects to http unless the job allows it
//   (allow_downgrade), credentials or not;
// - only Basic and Digest are offered for a user and password (never NTLM
//   or Negotiate: auth_kind says which);
// - secrets live in Secret buffers: excluded from core dumps, wiped when
//   freed, never printed (Secret has no stream operator and describe()
//   names kinds, never values).
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xfer {

// Bytes that must not leak: held in their own anonymous mapping, marked
// MADV_DONTDUMP (never in a core file) and MADV_WIPEONFORK (zeros in a forked
// child), locked in memory when the limit allows (never in swap), wiped with
// explicit_bzero before it is unmapped.
class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string_view bytes);
  Secret(const Secret& o) : Secret(o.view()) {}
  Secret(Secret&& o) noexcept;
  Secret& operator=(const Secret& o);
  Secret& operator=(Secret&& o) noexcept;
  ~Secret();

  std::string_view view() const { return {p_ ? p_ : "", n_}; }
  const char* c_str() const { return p_ ? p_ : ""; }  // NUL-terminated
  char* data() { return p_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  size_t mapped_bytes() const { return mapped_; }  // what it holds of memory (locked when allowed)

 private:
  void release() noexcept;
  char* p_ = nullptr;
  size_t n_ = 0, mapped_ = 0;
};

// Wipes a std::string's bytes (a secret that passed through one) before it goes.
void wipe(std::string& s) noexcept;

class CredentialError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// One machine of a netrc file (machine, login, password; "default" as machine
// "" with is_default). macdef blocks are skipped; account is ignored.
struct NetrcEntry {
  std::string machine;
  bool is_default = false;
  std::string login;
  Secret password;
};
// netrc text as curl and ftp read it: tokens separated by white space,
// "quoted strings" with \-escapes. Throws CredentialError naming the token
// (never a value) on what it cannot read.
std::vector<NetrcEntry> parse_netrc(std::string_view text);

enum class AuthKind { Basic, Digest, Any };  // Any: Basic or Digest, as the server asks
const char* to_string(AuthKind k);

// What one origin gets.
struct Credentials {
  std::string origin;  // scheme://host:port, as url_origin() writes it
  std::string user;    // with password (Basic / Digest) or SigV4's access key id
  Secret password;     // the password, or SigV4's secret key
  AuthKind auth = AuthKind::Basic;
  Secret bearer;       // Authorization: Bearer
  std::vector<std::pair<std::string, Secret>> headers;  // name, value: secret custom headers
  Secret client_cert, client_key, key_passphrase;      // PEM
  std::string sigv4;   // "aws:amz:REGION:SERVICE" (CURLOPT_AWS_SIGV4): user and password are the keys
  bool empty() const;
  // A user and password that may be answered with Digest (a challenge and a
  // second round): such an origin is spoken to in HTTP/1.1, since libcurl
  // 7.88 fails that second round on HTTP/2 ("Error in the HTTP2 framing
  // layer", curl #10634 and its kin).
  bool challenged() const { return bearer.empty() && sigv4.empty() && !password.empty() && auth != AuthKind::Basic; }
  // The kinds it holds, in words ("bearer token", "user and password (basic)",
  // "header X-Api-Key", "client certificate", "SigV4 (aws:amz:eu-1:s3)"):
  // what errors and logs may say of it. Never a value.
  std::string describe() const;
};

struct Proxy {
  std::string url;  // http://host:port or https://host:port; "" none
  std::string user;
  Secret password;
  std::string no_proxy;  // curl's list: hosts, domains, "*"
};

struct JobCredentials {
  std::vector<Credentials> origins;  // at most one per origin
  Proxy proxy;
  bool allow_downgrade = false;  // an https URL may redirect to http
  // What this origin gets, nullptr for nothing.
  const Credentials* find(std::string_view origin) const;
  bool empty() const { return origins.empty() && proxy.url.empty(); }
  // The memory its secrets hold (whole pages each, locked when allowed).
  size_t secret_bytes() const;
  // "bearer token for https://h:443; proxy http://p:3128 with a user": no values.
  std::string describe() const;
};

// netrc entries turned into per-origin credentials: each origin whose host
// is a machine of the file (else the default entry) gets its login and
// password. The host is matched as the entry names it, case-insensitively;
// no entry for a host means nothing for it (never another host's).
void bind_netrc(JobCredentials& c, const std::vector<NetrcEntry>& entries, const std::vector<std::string>& origins);

// Where a redirect from `from` to the Location `location` (possibly relative)
// goes: the absolute URL, or an empty URL and why it is refused (not http or
// https, https to http without allow_downgrade, user information in it, not
// a URL).
struct Redirect {
  std::string url, refused;
};
Redirect redirect_target(const std::string& from, const std::string& location, bool allow_downgrade);

// Core dumps of this process are off (PR_SET_DUMPABLE 0: no core file, no
// ptrace by processes of the same uid; RLIMIT_CORE 0, also for an admin's
// fs.suid_dumpable = 2), said once in the log; what a daemon holding other
// users' secrets calls at start.
void protect_process_memory();

}  // namespace xfer
