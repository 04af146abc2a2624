// libFuzzer: xferd.conf. Any text gives a configuration or a ConfigError
// naming the file; an accepted one passes the whole-configuration check or
// says why not.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  xferd::Config c = xferd::builtin_config();
  try {
    xferd::apply_config_text(text, "fuzz.conf", c);
    xferd::check_config(c);
  } catch (const xferd::ConfigError& e) {
    if (std::string(e.what()).rfind("fuzz.conf", 0) != 0 && std::string(e.what()).rfind("built-in", 0) != 0) std::abort();
    return 0;
  }
  // Whatever was accepted is a value of the option table.
  auto valid = [](const xfer::OptionValues& v) {
    for (const auto& [k, x] : v.items()) {
      const xfer::OptionSpec* o = xfer::find_option(k);
      if (!o || !xfer::check_option(*o, x).empty()) return false;
    }
    return true;
  };
  if (!valid(c.values) || !std::isfinite(c.keep_finished_days)) std::abort();
  for (const auto& [name, p] : c.policies)
    if (!valid(p.values)) std::abort();
  return 0;
}
