// Synthetic datasets shaped like the papers' (http-sla-transfer-algorithms.txt
// Table 1): HTML ~102 KB (sd 29 KB, 50-150 KB), image ~2.4 MB (sd 0.28 MB,
// 2-3 MB), video ~222 MB (sd 15 MB, 202-249 MB), their union (mixed), and a
// long-tailed log-normal set. Deterministic from the seed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace xfer {

struct DatasetSpec {
  std::string shape = "mixed";  // html | image | video | mixed | lognormal
  double scale = 1.0;           // multiplies the papers' file counts (5000 / 500 / 20)
  int count = 0;                // > 0: exactly this many files (per shape in mixed)
  double size_scale = 1.0;      // multiplies every file size (quick runs)
  uint64_t seed = 1;
};

struct GeneratedFile {
  std::string name;
  uint64_t size = 0;
  std::string sha256;
};

// The file names and sizes only (no I/O).
std::vector<GeneratedFile> plan_dataset(const DatasetSpec& spec);
// The bytes of a file: a deterministic stream from (seed, name).
void fill_content(uint64_t seed, const std::string& name, uint64_t offset, char* buf, size_t len);
// Writes the files into dir and returns them with their sha256. progress(done, total) is optional.
std::vector<GeneratedFile> write_dataset(const DatasetSpec& spec, const std::string& dir,
                                         const std::function<void(uint64_t, uint64_t)>& progress = {});
// "URL SIZE sha256:HEX" lines, URL = base_url + name.
std::string manifest_text(const std::vector<GeneratedFile>& files, const std::string& base_url);

}  // namespace xfer
