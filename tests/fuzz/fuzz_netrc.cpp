// libFuzzer: the netrc parser. Whatever the text, it returns entries or
// throws CredentialError; what it accepts binds to origins by host, and the
// description names no password (it reads the same whatever they are).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "xfer/credentials.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<xfer::NetrcEntry> entries;
  try {
    entries = xfer::parse_netrc(text);
  } catch (const xfer::CredentialError&) {
    return 0;
  }
  xfer::JobCredentials c;
  std::vector<std::string> origins{"https://files.example:443", "http://127.0.0.1:8080"};
  for (const auto& e : entries)
    if (!e.machine.empty() && e.machine.size() < 200) origins.push_back("https://" + e.machine + ":443");
  xfer::bind_netrc(c, entries, origins);
  for (const auto& k : c.origins)
    if (!c.find(k.origin)) std::abort();
  // The description does not depend on any password: the same with every
  // password replaced says the same.
  std::string shown = c.describe();
  for (auto& e : entries)
    if (!e.password.empty()) e.password = xfer::Secret("x");
  xfer::JobCredentials d;
  xfer::bind_netrc(d, entries, origins);
  if (d.describe() != shown) std::abort();
  return 0;
}
