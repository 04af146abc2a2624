#include "xfer/datagen.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>

#include "xfer/safe_open.h"
#include "xfer/sha256.h"

namespace xfer {
namespace {

struct Shape {
  const char* prefix;
  const char* ext;
  int paper_count;
  double mean, sd, lo, hi;  // bytes
};

// http-sla-transfer-algorithms.txt Table 1.
constexpr Shape kHtml{"html", ".html", 5000, 102e3, 29.14e3, 50e3, 150e3};
constexpr Shape kImage{"image", ".jpg", 500, 2.4e6, 0.28e6, 2e6, 3e6};
constexpr Shape kVideo{"video", ".avi", 20, 222e6, 14.78e6, 202e6, 249e6};

uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = seed ^ 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

int count_for(const Shape& s, const DatasetSpec& spec) {
  if (spec.count > 0) return spec.count;
  return std::max(1, static_cast<int>(std::lround(s.paper_count * spec.scale)));
}

void add_normal(std::vector<GeneratedFile>& out, const Shape& s, const DatasetSpec& spec, std::mt19937_64& rng) {
  std::normal_distribution<double> d(s.mean, s.sd);
  int n = count_for(s, spec);
  int width = std::max(3, static_cast<int>(std::to_string(n).size()));
  for (int i = 0; i < n; ++i) {
    double v = std::clamp(d(rng), s.lo, s.hi) * spec.size_scale;
    std::string idx = std::to_string(i + 1);
    idx.insert(0, width - idx.size(), '0');
    out.push_back({std::string(s.prefix) + "-" + idx + s.ext, std::max<uint64_t>(1, uint64_t(v)), ""});
  }
}

}  // namespace

std::vector<GeneratedFile> plan_dataset(const DatasetSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  std::vector<GeneratedFile> out;
  if (spec.shape == "html") add_normal(out, kHtml, spec, rng);
  else if (spec.shape == "image") add_normal(out, kImage, spec, rng);
  else if (spec.shape == "video") add_normal(out, kVideo, spec, rng);
  else if (spec.shape == "mixed") {
    add_normal(out, kHtml, spec, rng);
    add_normal(out, kImage, spec, rng);
    add_normal(out, kVideo, spec, rng);
  } else if (spec.shape == "lognormal") {
    // Median 1 MB, sigma 1.5: most files small, a few very large (clipped at 1 GB).
    std::lognormal_distribution<double> d(std::log(1e6), 1.5);
    int n = spec.count > 0 ? spec.count : std::max(1, static_cast<int>(std::lround(1000 * spec.scale)));
    for (int i = 0; i < n; ++i) {
      double v = std::clamp(d(rng), 1e3, 1e9) * spec.size_scale;
      out.push_back({"tail-" + std::to_string(100000 + i + 1).substr(1) + ".bin", std::max<uint64_t>(1, uint64_t(v)), ""});
    }
  } else {
    throw std::invalid_argument("unknown dataset shape '" + spec.shape + "' (html, image, video, mixed, lognormal)");
  }
  return out;
}

void fill_content(uint64_t seed, const std::string& name, uint64_t offset, char* buf, size_t len) {
  // Word w of the file is splitmix of (name seed + w): any offset can be
  // produced without generating what comes before it.
  uint64_t base = name_seed(seed, name);
  uint64_t word = offset / 8;
  size_t skip = offset % 8, done = 0;
  while (done < len) {
    uint64_t x = base + word * 0x9e3779b97f4a7c15ull;
    uint64_t v = splitmix(x);
    size_t n = std::min(len - done, 8 - skip);
    std::memcpy(buf + done, reinterpret_cast<const char*>(&v) + skip, n);
    done += n;
    skip = 0;
    ++word;
  }
}

std::vector<GeneratedFile> write_dataset(const DatasetSpec& spec, const std::string& dir,
                                         const std::function<void(uint64_t, uint64_t)>& progress) {
  std::vector<GeneratedFile> files = plan_dataset(spec);
  uint64_t total = 0, done = 0;
  for (auto& f : files) total += f.size;
  mkdir(dir.c_str(), 0755);
  std::vector<char> buf(1 << 20);
  for (auto& f : files) {
    std::string path = dir + "/" + f.name;
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw IoError(errno, "create " + path);
    Sha256 digest;
    for (uint64_t off = 0; off < f.size;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), f.size - off));
      fill_content(spec.seed, f.name, off, buf.data(), n);
      digest.update(buf.data(), n);
      if (::write(fd, buf.data(), n) != static_cast<ssize_t>(n)) {
        int err = errno;
        close(fd);
        throw IoError(err, "write " + path);
      }
      off += n;
      done += n;
      if (progress) progress(done, total);
    }
    close(fd);
    f.sha256 = digest.hex();
  }
  return files;
}

std::string manifest_text(const std::vector<GeneratedFile>& files, const std::string& base_url) {
  std::string out = "# URL SIZE sha256:HEX\n";
  for (const auto& f : files)
    out += base_url + f.name + " " + std::to_string(f.size) + (f.sha256.empty() ? "" : " sha256:" + f.sha256) + "\n";
  return out;
}

}  // namespace xfer
