#include "xfer/nesting.h"

#include <algorithm>
#include <vector>

namespace xfer {

size_t json_nesting(std::string_view s) {
  size_t depth = 0, worst = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') worst = std::max(worst, ++depth);
    else if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return worst;
}

namespace {

// Index just past the TOML string that starts at s[i] (basic, literal, or
// either multi-line form); s.size() when it does not end.
size_t skip_toml_string(std::string_view s, size_t i) {
  char q = s[i];
  bool multi = s.substr(i, 3) == std::string_view(q == '"' ? "\"\"\"" : "'''");
  size_t j = i + (multi ? 3 : 1);
  for (; j < s.size(); ++j) {
    if (q == '"' && s[j] == '\\') {
      ++j;
      continue;
    }
    if (!multi && s[j] == '\n') return j;  // unterminated: the parser says so
    if (s[j] != q) continue;
    if (!multi) return j + 1;
    if (s.substr(j, 3) == std::string_view(q == '"' ? "\"\"\"" : "'''")) return j + 3;
  }
  return s.size();
}

}  // namespace

size_t toml_nesting(std::string_view s) {
  size_t worst = 0, header = 0, parts = 0;
  std::vector<char> open;  // '[' and '{' of the value being read
  bool key = true;         // at a key: dots there make tables
  bool line_start = true;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '#') {
      while (i + 1 < s.size() && s[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      i = skip_toml_string(s, i) - 1;
      line_start = false;
      continue;
    }
    if (c == '\n') {
      if (open.empty()) key = true, parts = 0;
      line_start = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') continue;
    if (line_start && open.empty() && c == '[') {  // [table] or [[array of tables]]
      size_t dots = 0;
      for (++i; i < s.size() && s[i] != ']' && s[i] != '\n'; ++i) {
        if (s[i] == '"' || s[i] == '\'') i = skip_toml_string(s, i) - 1;
        else if (s[i] == '.') ++dots;
      }
      while (i + 1 < s.size() && s[i + 1] == ']') ++i;
      header = dots + 1;
      line_start = false;
      worst = std::max(worst, header);
      continue;
    }
    line_start = false;
    if (key) {
      if (c == '.') ++parts;
      else if (c == '=') key = false;
    } else if (c == '[' || c == '{') {
      open.push_back(c);
      key = c == '{';
    } else if ((c == ']' || c == '}') && !open.empty()) {
      open.pop_back();
    } else if (c == ',' && !open.empty() && open.back() == '{') {
      key = true;
    }
    worst = std::max(worst, header + parts + open.size() + 1);
  }
  return worst;
}

nlohmann::json parse_json_bounded(std::string_view text, const std::string& what) {
  size_t depth = json_nesting(text);
  if (depth > kMaxNesting)
    throw NestingError(what + ": nested " + std::to_string(depth) + " levels deep; xferd reads at most " +
                       std::to_string(kMaxNesting));
  return nlohmann::json::parse(text, nullptr, false);
}

void check_toml_nesting(std::string_view text, const std::string& what) {
  size_t depth = toml_nesting(text);
  if (depth > kMaxNesting)
    throw NestingError(what + ": tables, dotted keys and arrays nested " + std::to_string(depth) +
                       " levels deep; xferd reads at most " + std::to_string(kMaxNesting));
}

}  // namespace xfer
