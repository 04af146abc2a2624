#include "xfer/ranges.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace xfer {

void RangeSet::add(Range r) {
  if (r.empty()) return;
  // First range whose end reaches r.begin (touching counts, to merge neighbours).
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), r.begin,
                             [](const Range& x, uint64_t b) { return x.end < b; });
  auto last = it;
  while (last != ranges_.end() && last->begin <= r.end) {
    r.begin = std::min(r.begin, last->begin);
    r.end = std::max(r.end, last->end);
    ++last;
  }
  it = ranges_.erase(it, last);
  ranges_.insert(it, r);
}

void RangeSet::add(const RangeSet& other) {
  for (const Range& r : other.ranges_) add(r);
}

bool RangeSet::contains(Range r) const {
  if (r.empty()) return true;
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), r.begin,
                             [](uint64_t b, const Range& x) { return b < x.begin; });
  if (it == ranges_.begin()) return false;
  --it;
  return it->begin <= r.begin && r.end <= it->end;
}

uint64_t RangeSet::bytes() const {
  uint64_t n = 0;
  for (const Range& r : ranges_) n += r.size();
  return n;
}

std::vector<Range> RangeSet::missing(uint64_t total) const {
  std::vector<Range> gaps;
  uint64_t pos = 0;
  for (const Range& r : ranges_) {
    if (r.begin >= total) break;
    if (r.begin > pos) gaps.push_back({pos, r.begin});
    pos = std::max(pos, r.end);
  }
  if (pos < total) gaps.push_back({pos, total});
  return gaps;
}

std::string RangeSet::to_string() const {
  std::string s;
  for (const Range& r : ranges_) {
    if (!s.empty()) s += ',';
    s += std::to_string(r.begin) + '-' + std::to_string(r.end);
  }
  return s;
}

static uint64_t parse_u64(std::string_view t, const std::string& whole) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size() || t.empty())
    throw std::invalid_argument("bad range list '" + whole + "'");
  return v;
}

RangeSet RangeSet::parse(const std::string& text) {
  RangeSet set;
  std::string_view rest(text);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    size_t dash = item.find('-');
    if (dash == std::string_view::npos) throw std::invalid_argument("bad range list '" + text + "'");
    Range r{parse_u64(item.substr(0, dash), text), parse_u64(item.substr(dash + 1), text)};
    if (r.end < r.begin) throw std::invalid_argument("bad range list '" + text + "'");
    set.add(r);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return set;
}

std::vector<Range> split_range(Range r, int n, uint64_t min_piece) {
  if (r.empty()) return {};
  if (n < 1) n = 1;
  if (min_piece == 0) min_piece = 1;
  uint64_t most = std::max<uint64_t>(1, r.size() / min_piece);
  uint64_t pieces = std::min<uint64_t>(static_cast<uint64_t>(n), most);
  std::vector<Range> out;
  out.reserve(pieces);
  uint64_t base = r.size() / pieces, extra = r.size() % pieces, pos = r.begin;
  for (uint64_t i = 0; i < pieces; ++i) {
    uint64_t len = base + (i < extra ? 1 : 0);
    out.push_back({pos, pos + len});
    pos += len;
  }
  return out;
}

}  // namespace xfer
