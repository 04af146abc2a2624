// NAME.part.progress: the record of which byte ranges of NAME.part are on
// disk (part_file.h says how the engine uses it). Two range sets: `synced`,
// made durable by fdatasync of the .part file, and `written`, handed to the
// kernel, trusted only in the boot that wrote them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "xfer/ranges.h"
#include "xfer/safe_open.h"

namespace xfer {

struct ProgressRecord {
  std::string url, sha256, boot;  // sha256 "" when the manifest gave none
  // The version of the source its bytes are of (validator.h): "" when the
  // server gave none (or the record is older than validators).
  std::string validator;
  uint64_t size = 0;
  RangeSet synced, written;
};

// Throws std::invalid_argument when the text is not a record of this
// version (the record is then not used), or is larger than one xferd writes.
ProgressRecord parse_progress_record(std::string_view text);
std::string to_text(const ProgressRecord& r);

// The record `name` in dir_fd, read through open_regular: a FIFO, a
// directory or somebody else's file planted there is refused, never waited
// on. "" when there is none or it is unreadable; *found: whether a file was there.
std::string read_progress_record(int dir_fd, const std::string& name, const FileOwner& owner, bool* found = nullptr);

// Replaces the record `name` in dir_fd atomically (NAME.tmp, then rename),
// as a new file owned by owner; sync: fdatasync before the rename. Throws
// NameRefused (the name is held by a directory or something not a file) or
// IoError.
void write_progress_record(int dir_fd, const std::string& name, const std::string& text, const FileOwner& owner,
                           bool sync);

}  // namespace xfer
