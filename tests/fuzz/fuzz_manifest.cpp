// libFuzzer: the manifest parser. Whatever the text, it returns entries or
// throws ManifestError; what it accepts reads back the same from to_text().
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "xfer/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  xfer::Manifest m;
  try {
    m = xfer::parse_manifest(text, "fuzz");
  } catch (const xfer::ManifestError&) {
    return 0;
  }
  xfer::Manifest again = xfer::parse_manifest(xfer::to_text(m), "again");  // must not throw
  if (again.entries.size() != m.entries.size()) std::abort();
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const auto &a = m.entries[i], &b = again.entries[i];
    if (a.url != b.url || a.size != b.size || a.sha256 != b.sha256 || a.name != b.name) std::abort();
    if (a.name.empty() || a.name.find('/') != std::string::npos || a.name == "." || a.name == "..") std::abort();
  }
  return 0;
}
