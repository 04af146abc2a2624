// The names the engine writes beside a file it downloads (NAME.part and
// NAME.part.progress, and their .tmp while they are replaced): a manifest
// may not ask for one of them (dataset/manifest.cpp), and PartFile writes
// them (engine/part_file.cpp). Below both, so that neither reaches into
// the other.
#pragma once

#include <cstddef>
#include <string_view>

namespace xfer::part_names {

inline constexpr const char* kPartSuffix = ".part";
inline constexpr const char* kProgressSuffix = ".part.progress";
inline constexpr std::size_t kLongestSuffix = 18;  // ".part.progress.tmp"

// True for names the engine writes itself.
inline bool is_engine_name(std::string_view name) {
  return name.ends_with(kPartSuffix) || name.ends_with(kProgressSuffix) || name.ends_with(".tmp");
}

}  // namespace xfer::part_names
