// libFuzzer: the progress record reader (NAME.part.progress, a file in the
// caller's directory, so anything may be in it). It parses or throws
// std::invalid_argument; what it parses writes back the same ranges.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "xfer/progress_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  xfer::ProgressRecord r;
  try {
    r = xfer::parse_progress_record(text);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  for (const xfer::RangeSet* set : {&r.synced, &r.written}) {
    xfer::RangeSet back = xfer::RangeSet::parse(set->to_string());
    if (back.to_string() != set->to_string() || back.bytes() != set->bytes()) std::abort();
  }
  return 0;
}
