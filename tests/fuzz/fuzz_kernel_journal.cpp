// The kernel-state journal (JSON, read at every xferd start): any text gives
// entries that are all knobs under the root, or KernelStateError; nesting is
// refused before nlohmann::json (which recurses) sees it.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "xfer/kernel.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string root = "/sys/devices/system/cpu";
  try {
    for (const auto& [path, value] : xfer::parse_kernel_journal(text, "fuzz.json", root)) {
      if (path.compare(0, root.size() + 1, root + "/") != 0) std::abort();  // only knobs under the root
      if (path.find("/../") != std::string::npos || path.find('\0') != std::string::npos) std::abort();
      if (value.find('\n') != std::string::npos) std::abort();
    }
  } catch (const xfer::KernelStateError&) {
  }
  return 0;
}
