// Byte ranges: what part of a file is on disk, what is still missing, and how
// a missing span is cut into pieces for p parallel streams.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xfer {

// Half-open byte interval [begin, end).
struct Range {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const Range&) const = default;
};

// A set of disjoint, sorted, non-adjacent ranges. Adding merges overlaps and
// neighbours, so a file received in many small writes stays a short list.
class RangeSet {
 public:
  void add(Range r);
  void add(const RangeSet& other);
  bool contains(Range r) const;
  uint64_t bytes() const;
  // The gaps of [0, total) not covered by the set.
  std::vector<Range> missing(uint64_t total) const;
  const std::vector<Range>& ranges() const { return ranges_; }
  bool empty() const { return ranges_.empty(); }
  void clear() { ranges_.clear(); }

  // "0-1048576,2097152-4194304" (half-open); parse throws std::invalid_argument.
  std::string to_string() const;
  static RangeSet parse(const std::string& text);

 private:
  std::vector<Range> ranges_;
};

// Cuts r into at most n pieces of nearly equal size, none smaller than
// min_piece (except when r itself is smaller). n < 1 is treated as 1.
std::vector<Range> split_range(Range r, int n, uint64_t min_piece);

}  // namespace xfer
