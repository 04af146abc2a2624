#include "credentials.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <stdexcept>
#include <vector>

#include "credentials_args.h"
#include "xfer/safe_open.h"

namespace xferctl {

namespace {

struct Flag {
  const char* name;
  const char* key;
  bool secret;  // a file (or -), else the value itself
  const char* help;
};

const Flag kFlags[] = {
    {"--bearer-token-file", "bearer_token", true, "a file holding the bearer token (- : standard input)"},
    {"--user", "user", false, "user name for Basic or Digest authentication (its password: --password-file)"},
    {"--password-file", "password", true, "a file holding the password for --user"},
    {"--auth", "auth", false, "basic (default), digest or any (of the two; never NTLM or Negotiate)"},
    {"--header-file", "headers", true, "a file of secret request headers, 'Name: value' a line (API keys)"},
    {"--client-cert", "client_cert", true, "client certificate (PEM file) for TLS client authentication"},
    {"--client-key", "client_key", true, "the client certificate's private key (PEM file)"},
    {"--key-passphrase-file", "key_passphrase", true, "a file holding the private key's passphrase"},
    {"--netrc-file", "netrc", true, "a netrc file: each origin of the job whose host it names gets its login"},
    {"--aws-sigv4", "aws_sigv4", false, "sign requests with AWS SigV4: aws:amz:REGION:SERVICE (keys: --aws-keys-file)"},
    {"--aws-keys-file", "aws_keys", true, "a file holding ACCESS_KEY_ID:SECRET_ACCESS_KEY"},
    {"--proxy", "proxy", false, "an http:// or https:// proxy for the job"},
    {"--proxy-user", "proxy_user", false, "user name for the proxy (its password: --proxy-password-file)"},
    {"--proxy-password-file", "proxy_password", true, "a file holding the proxy's password"},
    {"--no-proxy", "no_proxy", false, "hosts reached without the proxy, comma-separated"},
    {"--credentials-origin", "origin", false, "the origin (a URL of it) the credentials are for; default: the job's one origin"},
};

}  // namespace

void add_credential_flags(CLI::App* cmd, CredentialFlags& into) {
  for (const Flag& f : kFlags) {
    std::map<std::string, std::string>& m = f.secret ? into.files : into.plain;
    std::string key = f.key;
    cmd->add_option_function<std::string>(f.name, [&m, key](const std::string& v) { m[key] = v; }, f.help)
        ->group("Credentials");
  }
  cmd->add_flag("--allow-downgrade", into.allow_downgrade, "let an https URL redirect to http (refused otherwise)")
      ->group("Credentials");
}

namespace {

void one_stdin(const CredentialFlags& c) {
  int stdin_uses = 0;
  for (const auto& [key, path] : c.files)
    if (path == "-" && ++stdin_uses > 1) throw std::runtime_error("only one credential file may be '-' (standard input)");
}

std::string read_stdin(const std::string& key) {
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(STDIN_FILENO, buf, sizeof buf)) > 0) {
    text.append(buf, size_t(n));
    if (text.size() > (1u << 20)) {
      explicit_bzero(text.data(), text.size());
      throw std::runtime_error(key + " from standard input: more than 1 MiB");
    }
  }
  explicit_bzero(buf, sizeof buf);
  return text;
}

}  // namespace

std::shared_ptr<const xfer::JobCredentials> local_credentials(const CredentialFlags& c,
                                                              const std::vector<std::string>& origins) {
  one_stdin(c);
  std::vector<xferd::CredentialField> fields;
  for (const auto& [key, value] : c.plain) fields.push_back({key, 's', value});
  for (const auto& [key, path] : c.files)
    fields.push_back({key, 's', path == "-" ? read_stdin(key) : xfer::read_small_file(path, 1 << 20, key + " file")});
  if (c.allow_downgrade) fields.push_back({"allow_downgrade", 'b', "1"});
  try {
    auto out = xferd::bind_credentials(xferd::credentials_from_fields(fields), origins);
    for (auto& f : fields) xfer::wipe(f.value);
    return out;
  } catch (const xferd::Refusal& r) {
    for (auto& f : fields) xfer::wipe(f.value);
    throw std::runtime_error(r.what());
  }
}

int append_credentials(sd_bus_message* m, const CredentialFlags& c) {
  sd_bus_message_sensitive(m);
  one_stdin(c);
  std::vector<int> fds;
  struct Close {
    std::vector<int>& fds;
    ~Close() {
      for (int fd : fds) close(fd);
    }
  } closer{fds};
  int r = sd_bus_message_open_container(m, 'a', "{sv}");
  for (const auto& [key, value] : c.plain)
    if (r >= 0) r = sd_bus_message_append(m, "{sv}", key.c_str(), "s", value.c_str());
  for (const auto& [key, path] : c.files) {
    if (r < 0) break;
    if (path == "-") {
      std::string text = read_stdin(key);
      r = sd_bus_message_append(m, "{sv}", key.c_str(), "s", text.c_str());
      explicit_bzero(text.data(), text.size());
      continue;
    }
    // Opened as the user who runs xferctl: what they may read, nothing more.
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) throw std::runtime_error(path + ": " + strerror(errno));
    fds.push_back(fd);
    r = sd_bus_message_append(m, "{sv}", key.c_str(), "h", fd);
  }
  if (r >= 0 && c.allow_downgrade) r = sd_bus_message_append(m, "{sv}", "allow_downgrade", "b", 1);
  if (r >= 0) r = sd_bus_message_close_container(m);
  return r;
}

}  // namespace xferctl
