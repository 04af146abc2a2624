// The power model file (TOML, written by xferctl calibrate, editable by an
// admin): any text gives coefficients or a runtime_error naming the file;
// nesting is refused before toml++ (which recurses) sees it.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "xfer/energy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    xfer::PowerCoefficients c = xfer::PowerCoefficients::parse(text, "fuzz.toml");
    for (double v : {c.cpu_a, c.cpu_b, c.cpu_c, c.memory, c.disk, c.nic, c.tdp_ratio, c.idle_watts, c.idle_core_watts})
      if (!std::isfinite(v)) std::abort();  // parse promises finite values
  } catch (const std::runtime_error& e) {
    if (std::string_view(e.what()).find("fuzz.toml") == std::string_view::npos) std::abort();  // errors name the file
  }
  return 0;
}
