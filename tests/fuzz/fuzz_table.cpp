// libFuzzer: the parameter table reader (xfer-hla analyze's output, which
// xferd and xferctl load). Any text: a table or a TableError, never a
// crash; what it accepts, written again, reads back the same.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "xfer/hla.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  xfer::hla::ParamTable t;
  try {
    t = xfer::hla::table_from_text(text, "fuzz.json");  // what xferd and xferctl read (nesting bounded first)
  } catch (const xfer::hla::TableError&) {
    return 0;
  }
  nlohmann::json again = xfer::hla::to_json(t);
  xfer::hla::ParamTable back = xfer::hla::table_from_json(again);  // throws (and so aborts) if it does not read back
  if (xfer::hla::to_json(back) != again) std::abort();
  (void)xfer::hla::describe(back);
  return 0;
}
