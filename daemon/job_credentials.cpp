#include "job_credentials.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "xfer/safe_open.h"
#include "xfer/text.h"

namespace xferd {

// systemd fills $CREDENTIALS_DIRECTORY from LoadCredential= (root's,
// read-only, on a ramfs).
xfer::Secret systemd_credential(const std::string& name) {
  const char* dir = getenv("CREDENTIALS_DIRECTORY");
  if (!dir || !*dir)
    throw std::runtime_error("credential '" + name + "': no $CREDENTIALS_DIRECTORY (give it with LoadCredential=" + name +
                             ":PATH in xferd.service)");
  std::string text;
  try {
    text = xfer::read_small_file(std::string(dir) + "/" + name, 1 << 20, "systemd credential");
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("credential '" + name + "' (LoadCredential=" + name + ":PATH in xferd.service): " + e.what());
  }
  std::string_view v = text;
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.remove_suffix(1);
  xfer::Secret s(v);
  xfer::wipe(text);
  return s;
}

std::shared_ptr<const xfer::JobCredentials> with_policy_credentials(const Policy& p,
                                                                    const std::shared_ptr<const xfer::JobCredentials>& job,
                                                                    const std::vector<std::string>& origins, bool own_ca,
                                                                    std::string* withheld) {
  auto out = job ? std::make_shared<xfer::JobCredentials>(*job) : std::make_shared<xfer::JobCredentials>();
  bool own_proxy = !out->proxy.url.empty();
  if (!p.proxy.empty() && !own_proxy) {  // the job's own proxy wins (and then gets no policy secret)
    out->proxy.url = p.proxy;
    out->proxy.user = p.proxy_user;
    out->proxy.no_proxy = p.no_proxy;
    if (!p.proxy_password_credential.empty()) out->proxy.password = systemd_credential(p.proxy_password_credential);
  }
  std::string origin = xfer::url_origin(p.credentials_origin);
  bool used = std::find(origins.begin(), origins.end(), origin) != origins.end();
  if (!origin.empty() && used && !out->find(origin)) {
    // The admin's secret goes only where the admin sent it: a proxy the
    // caller chose sees it (in the clear, or inside a tunnel it terminates
    // with a certificate the caller's own CA file vouches for).
    bool tls = origin.rfind("https://", 0) == 0;
    if (own_proxy || (own_ca && tls)) {
      if (withheld)
        *withheld = fmt::format("policy {}'s credentials for {} are withheld: the job brings its own {}", p.name,
                                xfer::printable(origin), own_proxy ? "proxy" : "CA file");
      return out;
    }
    xfer::Credentials c;
    c.origin = origin;
    if (!p.bearer_token_credential.empty()) c.bearer = systemd_credential(p.bearer_token_credential);
    if (!p.password_credential.empty()) {
      c.user = p.user;
      c.password = systemd_credential(p.password_credential);
      c.auth = xfer::AuthKind::Any;
    }
    out->origins.push_back(std::move(c));
  }
  return out;
}

std::string read_ca_pem(int fd, const std::string& path, std::string* why) {
  std::string pem;
  try {
    pem = xfer::read_bounded(fd, kMaxCaBytes, path);
  } catch (const xfer::IoError& e) {
    *why = "file " + xfer::shown(path) + ": " + e.code().message();
    return "";
  }
  lseek(fd, 0, SEEK_SET);  // read again when the job starts
  if (pem.size() > kMaxCaBytes)
    *why = "file " + xfer::shown(path) + " is larger than " + std::to_string(kMaxCaBytes) + " bytes";
  else if (!xfer::has_pem_certificate(pem))
    *why = "file " + xfer::shown(path) + " holds no PEM certificate (-----BEGIN CERTIFICATE-----)";
  return why->empty() ? pem : std::string();
}

std::string policy_ca_pem(const Policy& p, std::string* why) {
  const std::string path = p.values.value("ca_file", std::string());
  if (path.empty()) return "";
  std::string pem;
  try {
    pem = xfer::read_small_file(path, kMaxCaBytes, "file of PEM certificates");
  } catch (const std::runtime_error& e) {
    *why = std::string("policy ca_file: ") + e.what();
    return "";
  }
  if (!xfer::has_pem_certificate(pem)) {
    *why = "policy ca_file " + xfer::printable(path) + " holds no PEM certificate (-----BEGIN CERTIFICATE-----)";
    return "";
  }
  return pem;
}

}  // namespace xferd
