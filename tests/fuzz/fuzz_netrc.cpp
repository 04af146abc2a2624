// libFuzzer: the netrc parser. Whatever the text, it returns entries or
// throws CredentialError, whose message never holds a password; what it
// accepts binds to origins by host, and the description names no value.
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
  std::string shown = c.describe();
  for (const auto& k : c.origins) {
    if (!c.find(k.origin)) std::abort();
    if (k.password.size() >= 6 && shown.find(k.password.view()) != std::string::npos) std::abort();
  }
  return 0;
}
