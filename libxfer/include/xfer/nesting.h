// How deep the JSON and TOML that xferd reads may nest. nlohmann::json and
// toml++ build (and copy, dump, destroy) nested values by recursion: a file
// nested a million levels deep (2 MB of '[') overflows the stack of whoever
// reads it, the daemon at start or on Reload. Every reader measures the
// nesting of the text first, with a scan that does not recurse, and refuses
// what is deeper than kMaxNesting.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace xfer {

// Far above what anything xferd writes or documents (a parameter table nests
// 6 levels, a configuration 4), far below what a thread's stack survives.
inline constexpr size_t kMaxNesting = 64;

class NestingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The deepest nesting of arrays and objects in JSON text, strings skipped.
size_t json_nesting(std::string_view text);

// An upper bound on the nesting of TOML text: for each key, the parts of its
// table header, its own dotted parts and the arrays and inline tables around
// it (a float's '.' in a value does not count).
size_t toml_nesting(std::string_view text);

// json::parse(text) once its nesting is known to be at most kMaxNesting;
// throws NestingError naming `what` when deeper. Like parse(text, nullptr,
// false), text that is not JSON gives a discarded value.
nlohmann::json parse_json_bounded(std::string_view text, const std::string& what);

// Throws NestingError naming `what` when TOML text nests deeper than kMaxNesting.
void check_toml_nesting(std::string_view text, const std::string& what);

}  // namespace xfer
