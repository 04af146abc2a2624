// xfer-datagen: writes a dataset shaped like the papers' and its manifest.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fstream>

#include "xfer/datagen.h"
#include "xfer/safe_open.h"

int main(int argc, char** argv) {
  CLI::App app{"xfer-datagen: synthetic datasets (html, image, video, mixed, lognormal) with a sha256 manifest"};
  xfer::DatasetSpec spec;
  std::string out, base_url, manifest;
  app.add_option("--shape", spec.shape, "html | image | video | mixed | lognormal")
      ->check(CLI::IsMember({"html", "image", "video", "mixed", "lognormal"}));
  app.add_option("--scale", spec.scale, "multiplies the papers' file counts (5000 html, 500 image, 20 video)")
      ->check(CLI::PositiveNumber);
  app.add_option("--count", spec.count, "exactly this many files (per shape in mixed)");
  app.add_option("--size-scale", spec.size_scale, "multiplies every file size")->check(CLI::PositiveNumber);
  app.add_option("--seed", spec.seed, "seed: same seed, same bytes");
  app.add_option("--out", out, "directory for the files")->required();
  app.add_option("--base-url", base_url, "URL prefix for the manifest, e.g. http://127.0.0.1:8080/data/")->required();
  app.add_option("--manifest", manifest, "manifest path (default OUT/../NAME.manifest)");
  CLI11_PARSE(app, argc, argv);
  if (manifest.empty()) manifest = out + ".manifest";
  bool tty = isatty(STDERR_FILENO);
  try {
    auto files = xfer::write_dataset(spec, out, [&](uint64_t done, uint64_t total) {
      if (tty && (done % (64u << 20) < (1u << 20) || done == total))
        fmt::print(stderr, "\rxfer-datagen: {:.0f} / {:.0f} MB", done / 1e6, total / 1e6);
    });
    if (tty) fmt::print(stderr, "\n");
    std::ofstream(manifest) << xfer::manifest_text(files, base_url);
    uint64_t total = 0;
    for (auto& f : files) total += f.size;
    fmt::print("{} files, {} bytes in {}; manifest {}\n", files.size(), total, out, manifest);
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-datagen: {}\n", e.what());
    return 1;
  }
  return 0;
}
