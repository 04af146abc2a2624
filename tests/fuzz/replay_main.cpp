// Runs a fuzz target's input function once on every file of a directory (its
// seed corpus) without libFuzzer: the ordinary build's check that each seed
// still parses without a crash or a sanitizer report, and that the target
// still links from tests/fuzz/sources.cmake.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(argv[1], ec)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(data.data(), data.size());
    ++n;
  }
  if (ec || n == 0) {
    std::fprintf(stderr, "%s: no seeds in %s%s%s\n", argv[0], argv[1], ec ? ": " : "", ec ? ec.message().c_str() : "");
    return 1;
  }
  std::printf("%zu seeds replayed from %s\n", n, argv[1]);
  return 0;
}
