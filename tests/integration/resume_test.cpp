// kill -9 in the middle of a job, then the same command again.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "fixture.h"
#include "xfer/part_file.h"

namespace fs = std::filesystem;
using namespace xtest;

namespace {

// Bytes of dest/NAME(.part) equal to the dataset's file: what a killed run
// really got onto disk (.part files are preallocated with zeros; a zero in the
// random content matching by chance makes this count slightly high, which
// only makes the re-fetch figure below stricter).
uint64_t bytes_on_disk(const Dataset& d, const std::string& dest) {
  uint64_t got = 0;
  std::vector<char> a(1 << 16), b(1 << 16);
  for (const auto& f : d.files) {
    fs::path p = fs::path(dest) / f.name;
    if (!fs::exists(p)) p += ".part";
    if (!fs::exists(p)) continue;
    std::ifstream have(p, std::ios::binary), want(fs::path(d.dir) / f.name, std::ios::binary);
    while (have.read(a.data(), a.size()), want.read(b.data(), b.size()), have.gcount() > 0 && want.gcount() > 0) {
      size_t n = size_t(std::min(have.gcount(), want.gcount()));
      if (std::memcmp(a.data(), b.data(), n) == 0) {
        got += n;
        continue;
      }
      for (size_t i = 0; i < n; ++i) got += a[i] == b[i];
    }
  }
  return got;
}

uint64_t body_bytes(const Nginx& n) {
  uint64_t b = 0;
  for (const auto& l : n.log()) b += l.bytes;
  return b;
}

pid_t spawn_xferctl(const std::string& manifest, const std::string& dest, const std::string& out) {
  pid_t pid = fork();
  if (pid == 0) {
    freopen(out.c_str(), "w", stdout);
    freopen((out + ".err").c_str(), "w", stderr);
    execl(bin("xferctl").c_str(), "xferctl", "run", "--manifest", manifest.c_str(), "--dest", dest.c_str(), "--cc",
          "2", "--p", "2", "--json", "--no-progress", nullptr);
    _exit(127);
  }
  return pid;
}

}  // namespace

TEST(Resume, KillNineMidJobThenResumeFetchesOnlyWhatIsMissing) {
  Dataset d = dataset(20, 4, 1, 0.5);
  set_link_rate(200);  // 25 MB/s: the job lasts about five seconds
  Nginx nginx(d.dir);
  std::string work = make_temp_dir("resume");
  std::string dest = work + "/dest", manifest = work + "/m.txt";
  fs::create_directory(dest);
  std::ofstream(manifest) << d.manifest(nginx.url(false, "/"));

  pid_t pid = spawn_xferctl(manifest, dest, work + "/run1.json");
  // Kill once about a third of the bytes are on disk.
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    if (bytes_on_disk(d, dest) > d.bytes * 35 / 100) break;
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // nginx logs the cut requests
  uint64_t first = body_bytes(nginx);

  uint64_t got = bytes_on_disk(d, dest);
  // Nothing half-written at a final name; partial files are there to resume.
  int parts = 0, direct_parts = 0;
  for (const auto& e : fs::directory_iterator(dest)) {
    std::string n = e.path().filename().string();
    if (n.ends_with(".part")) {
      ++parts;
      std::string name = n.substr(0, n.size() - std::strlen(".part"));
      for (const auto& f : d.files) direct_parts += f.name == name && f.size >= xfer::PartFile::kDirectFrom;
    } else if (!n.ends_with(".progress")) {
      expect_identical(d, dest, {n});
    }
  }
  EXPECT_GT(parts, 0);

  nginx.clear_log();
  pid = spawn_xferctl(manifest, dest, work + "/run2.json");
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 0);
  uint64_t second = body_bytes(nginx);
  std::ifstream in(work + "/run2.json");
  nlohmann::json s = nlohmann::json::parse(in);
  EXPECT_GT(s["bytes_resumed"].get<uint64_t>(), 0u);

  expect_identical(d, dest);
  expect_no_partials(dest);
  // Re-fetched: what the second run fetched beyond what was missing on disk.
  uint64_t fetched2 = s["bytes_fetched"].get<uint64_t>();
  uint64_t missing = d.bytes - got;
  uint64_t refetched = fetched2 > missing ? fetched2 - missing : 0;
  std::printf("first run: %llu bytes on disk when killed (server sent %llu, the rest was in socket buffers);\n"
              "second run fetched %llu bytes (server sent %llu); re-fetched %llu bytes = %.2f%% of the first run's\n",
              (unsigned long long)got, (unsigned long long)first, (unsigned long long)fetched2,
              (unsigned long long)second, (unsigned long long)refetched, 100.0 * double(refetched) / double(got));
  EXPECT_GT(got, d.bytes / 10);
  // What a kill may cost by design (part_file.h): the bytes written since a
  // file's last record, under 10% of what was on disk; and, for each file
  // written with O_DIRECT, up to kMaxInFlight buffers whose writes were in
  // flight, which the kernel finishes after the kill but no record names.
  // (One CI run: 5.5 MB re-fetched, 10.7% of 51.7 MB, with 3 such files.)
  const double in_flight = double(direct_parts) * xfer::PartFile::kMaxInFlight * xfer::PartFile::kStageBytes;
  EXPECT_LT(double(refetched), 0.10 * double(got) + in_flight) << direct_parts << " files written with O_DIRECT";
  fs::remove_all(work);
}
