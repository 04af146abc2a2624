// Issue 53, finding 1: a file's bytes are of one version of its source. A
// source replaced between a stop and the resume, or while its ranges are
// fetched in parallel, is never spliced: the file starts again from zero (or
// fails with the reason), as validators (ETag, Last-Modified; RFC 9110
// §13.1.5) and If-Range make possible. Tried on nginx (kill -9 of xferctl
// run, and Pause / Resume of xferd) and on the test server, whose versions
// change on the test's word.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "daemon.h"
#include "daemon_env.h"
#include "fixture.h"
#include "flaky_server.h"
#include "xfer/part_file.h"
#include "xfer/progress_record.h"
#include "xfer/sha256.h"

namespace fs = std::filesystem;
using namespace xtest;

namespace {

std::string version_bytes(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  std::mt19937_64 rng(seed);
  for (auto& c : s) c = char(rng());
  return s;
}

std::string contents_of(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Replaces path with new content (a new inode, as a publisher's rename
// does), its mtime moved on so that nginx's ETag and Last-Modified change.
void publish_version(const std::string& path, const std::string& content, int seconds_later) {
  std::string tmp = path + ".new";
  std::ofstream(tmp, std::ios::binary) << content;
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  timespec t[2] = {{st.st_mtime + seconds_later, 0}, {st.st_mtime + seconds_later, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, tmp.c_str(), t, 0), 0);
  ASSERT_EQ(rename(tmp.c_str(), path.c_str()), 0);
}

// What an earlier run left: NAME.part holding `bytes` at 0, and a record
// that says they were written, for the version `validator` ("" none).
void leave_partial(const std::string& dest, const std::string& name, const std::string& url, uint64_t size,
                   const std::string& bytes, const std::string& validator) {
  std::ofstream(dest + "/" + name + xfer::PartFile::kPartSuffix, std::ios::binary) << bytes;
  xfer::ProgressRecord rec;
  rec.url = url;
  rec.size = size;
  rec.validator = validator;
  rec.boot = contents_of("/proc/sys/kernel/random/boot_id").substr(0, 36);
  rec.synced.add({0, bytes.size()});
  std::ofstream(dest + "/" + name + xfer::PartFile::kProgressSuffix) << xfer::to_text(rec);
}

pid_t spawn_one_stream_run(const std::string& manifest, const std::string& dest, const std::string& out) {
  pid_t pid = fork();
  if (pid == 0) {
    freopen(out.c_str(), "w", stdout);
    freopen((out + ".err").c_str(), "w", stderr);
    execl(bin("xferctl").c_str(), "xferctl", "run", "--manifest", manifest.c_str(), "--dest", dest.c_str(), "--cc",
          "1", "--p", "1", "--json", "--no-progress", nullptr);
    _exit(127);
  }
  return pid;
}

}  // namespace

// The first case: a 24 MB file, no sha256 in the manifest, xferctl
// run killed with -9 a third of the way, the file replaced on the server by
// another of the same size, the same command again: the new version, whole.
TEST(Validators, ASourceReplacedBetweenAKillAndTheResumeIsFetchedAgainWhole) {
  std::string data = make_temp_dir("data"), work = make_temp_dir("validators");
  std::string v1 = version_bytes(24 << 20, 1), v2 = version_bytes(24 << 20, 2);
  std::ofstream(data + "/big.bin", std::ios::binary) << v1;
  Nginx nginx(data, "4m");
  std::string dest = work + "/dest", manifest = work + "/m";
  fs::create_directory(dest);
  std::ofstream(manifest) << nginx.url(false, "/slow/big.bin") << "\n";  // no size, no sha256: most users' lists
  pid_t pid = spawn_one_stream_run(manifest, dest, work + "/run1.json");
  auto t0 = std::chrono::steady_clock::now();
  while (!fs::exists(dest + "/big.bin.part.progress") || fs::file_size(dest + "/big.bin.part.progress") == 0 ||
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2)) {
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_FALSE(fs::exists(dest + "/big.bin"));
  std::string record = contents_of(dest + "/big.bin.part.progress");
  EXPECT_NE(record.find("validator etag \""), std::string::npos) << record;  // nginx's ETag, kept with the bytes
  publish_version(data + "/big.bin", v2, 100);
  pid = spawn_one_stream_run(manifest, dest, work + "/run2.json");
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << contents_of(work + "/run2.json.err");
  std::string got = contents_of(dest + "/big.bin");
  EXPECT_TRUE(got == v2) << "the file at its final name is not the new version (" << got.size() << " bytes; "
                         << (got.substr(0, 4096) == v1.substr(0, 4096) ? "starts as the old one" : "starts otherwise")
                         << ")";
  nlohmann::json s = nlohmann::json::parse(contents_of(work + "/run2.json"));
  EXPECT_EQ(s["source_restarts"], 1) << s.dump();
  EXPECT_NE(contents_of(work + "/run2.json.err").find("the source changed"), std::string::npos) << contents_of(work + "/run2.json.err");
  // The resume asked with If-Range for the version it had.
  expect_no_partials(dest);
  fs::remove_all(work);
  fs::remove_all(data);
}

// The same through xferd: Pause, the file replaced, Resume.
TEST(Validators, ASourceReplacedWhileAJobIsPausedIsFetchedAgainWhole) {
  PrivateBus bus;
  std::string data = make_temp_dir("data"), dest = make_temp_dir("dest");
  std::string v1 = version_bytes(24 << 20, 3), v2 = version_bytes(24 << 20, 4);
  std::ofstream(data + "/big.bin", std::ios::binary) << v1;
  Nginx nginx(data, "4m");
  Xferd xferd(config("[policy.min-energy]\nalgorithm = \"min-energy\"\n[policy.app-min-energy]\nalgorithm = \"min-energy\"\n"));
  xferd.start();
  std::string m = make_temp_dir("m") + "/m";
  std::ofstream(m) << nginx.url(false, "/slow/big.bin") << "\n";
  Shell sub = run(bin("xferctl") + " submit --manifest " + m + " --dest " + dest);
  ASSERT_EQ(sub.status, 0) << sub.out;
  std::string path = sub.out.substr(0, sub.out.find('\n'));
  wait_bytes(path, 4 << 20);
  ASSERT_EQ(run(bin("xferctl") + " pause " + path).status, 0);
  publish_version(data + "/big.bin", v2, 100);
  ASSERT_EQ(run(bin("xferctl") + " resume " + path).status, 0);
  EXPECT_EQ(wait_state(path, {"done", "failed", "cancelled"}, 120), "done") << xferd.log();
  EXPECT_TRUE(contents_of(dest + "/big.bin") == v2) << "not the new version whole";
  EXPECT_NE(xferd.log().find("the source changed"), std::string::npos) << xferd.log();
  xferd.stop();
  fs::remove_all(data);
  fs::remove_all(dest);
  fs::remove_all(fs::path(m).parent_path());
}

// Four streams on one file; the server moves to a new version mid-file and
// cuts the old version's responses (a restart onto the new file). Their rest,
// asked again with If-Range of the old version, comes back whole as the new
// one: the file starts again and ends as the new version, never a splice. A
// second file the manifest gives no size for gets a longer new version.
TEST(Validators, ASourceReplacedMidFileUnderFourStreamsIsNeverSpliced) {
  // Four streams of about 1.4 MB/s each (/trickle/): 4 MB take about 0.7 s.
  std::string v1 = version_bytes(4 << 20, 5), v2 = version_bytes(4 << 20, 6);
  FlakyServer srv(v1);
  srv.validators = true;
  std::string dest = make_temp_dir("dest"), base = "http://127.0.0.1:" + std::to_string(srv.port);
  std::string m = base + "/trickle/a.bin " + std::to_string(v1.size()) + "\n";
  // Once the four ranges are under way, a new version, the old one's responses cut.
  auto replace_mid_file = [&srv](const std::string& file, std::string next) {
    return std::thread([&srv, file, next = std::move(next)]() mutable {
      for (int i = 0; i < 1000; ++i) {
        int gets = 0;
        for (const std::string& q : srv.requests()) gets += q.rfind("GET /trickle/" + file, 0) == 0;
        if (gets >= 4) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      srv.replace(std::move(next), true);
    });
  };
  std::thread change = replace_mid_file("a.bin", v2);
  xfer::EngineOptions o;
  auto r = run_job(m, dest, "static", {1, 4, 1}, o);
  change.join();
  ASSERT_EQ(r.state, xfer::JobState::Done) << r.summary.dump(2);
  EXPECT_EQ(r.summary["files_ok"], 1) << r.summary["failed"].dump();
  EXPECT_TRUE(contents_of(dest + "/a.bin") == v2) << "not the new version whole";
  EXPECT_GE(r.summary["source_restarts"].get<int>(), 1) << r.summary.dump();
  int if_range = 0;
  for (const std::string& h : srv.heads()) if_range += h.find("\r\nIf-Range: \"v1\"") != std::string::npos;
  EXPECT_GT(if_range, 0) << "the ranges asked after the first response carry the file's version";
  // A longer new version of a file whose size the server gave.
  std::string v3 = version_bytes(5 << 20, 7);
  std::thread grow = replace_mid_file("b.bin", v3);
  auto g = run_job(base + "/trickle/b.bin\n", dest, "static", {1, 4, 1}, o);
  grow.join();
  ASSERT_EQ(g.state, xfer::JobState::Done) << g.summary.dump(2);
  EXPECT_EQ(g.summary["files_ok"], 1) << g.summary["failed"].dump();
  EXPECT_TRUE(contents_of(dest + "/b.bin") == v3) << "not the new version whole";
  expect_no_partials(dest);
  fs::remove_all(dest);
}

// Bytes an earlier run left for another version than the server has now,
// and bytes of no known version: never part of a final file by default.
TEST(Validators, ALeftoverOfAnotherVersionOrOfNoneIsNotResumed) {
  std::string content = version_bytes(2 << 20, 8), stale(1 << 20, 'S');
  FlakyServer srv(content);
  srv.validators = true;
  std::string dest = make_temp_dir("dest"), base = "http://127.0.0.1:" + std::to_string(srv.port);
  std::string size = std::to_string(content.size());
  // Of version "v0" (the server has "v1"): the resume's If-Range gets 200, the file starts again.
  leave_partial(dest, "old.bin", base + "/plain/old.bin", content.size(), stale, "etag \"v0\"");
  // Of no version, from a server that gives none: fetched whole...
  leave_partial(dest, "none.bin", base + "/noetag/none.bin", content.size(), stale, "");
  // ...and from one that gives only a weak tag, the same.
  leave_partial(dest, "weak.bin", base + "/weak/weak.bin", content.size(), stale, "");
  // Of the version the server has: resumed, only the rest fetched.
  leave_partial(dest, "same.bin", base + "/plain/same.bin", content.size(), content.substr(0, 1 << 20), "etag \"v1\"");
  std::string m = base + "/plain/old.bin " + size + "\n" + base + "/noetag/none.bin " + size + "\n" + base +
                  "/weak/weak.bin " + size + "\n" + base + "/plain/same.bin " + size + "\n";
  auto r = run_job(m, dest, "static", {4, 1, 1}, xfer::EngineOptions{});
  ASSERT_EQ(r.state, xfer::JobState::Done) << r.summary.dump(2);
  for (const char* n : {"old.bin", "none.bin", "weak.bin", "same.bin"})
    EXPECT_TRUE(contents_of(dest + "/" + n) == content) << n << " is not the server's version";
  EXPECT_EQ(r.summary["source_restarts"], 1) << r.summary.dump();
  EXPECT_EQ(r.summary["files_no_validator"], 2) << r.summary.dump();
  // On disk when the run began: old.bin's (then discarded) and same.bin's.
  EXPECT_EQ(r.summary["bytes_resumed"], 2 << 20);
  EXPECT_EQ(r.summary["bytes_fetched"], 7 << 20) << "all of old.bin, none.bin and weak.bin, half of same.bin";
  // unvalidated_resume = trust: the caller vouches for the bytes, which stay.
  fs::remove(dest + "/none.bin");
  leave_partial(dest, "none.bin", base + "/noetag/none.bin", content.size(), stale, "");
  xfer::EngineOptions trust;
  trust.unvalidated_resume = true;
  auto t = run_job(base + "/noetag/none.bin " + size + "\n", dest, "static", {1, 1, 1}, trust);
  ASSERT_EQ(t.state, xfer::JobState::Done) << t.summary.dump(2);
  EXPECT_EQ(contents_of(dest + "/none.bin").substr(0, 1 << 20), stale) << "trusted bytes were kept";
  fs::remove_all(dest);
}

// Some CDNs answer an If-Range that names an entity tag with the whole body,
// even for the version they have: that is no change of the source. The
// resume goes on without If-Range (each response's ETag still compared) and
// fetches only what is missing.
TEST(Validators, AServerThatIgnoresIfRangeStillResumesOnlyTheRest) {
  std::string content = version_bytes(2 << 20, 9);
  FlakyServer srv(content);
  srv.validators = true;
  std::string dest = make_temp_dir("dest"), base = "http://127.0.0.1:" + std::to_string(srv.port);
  std::string url = base + "/ignore-if-range/c.bin";
  leave_partial(dest, "c.bin", url, content.size(), content.substr(0, 1 << 20), "etag \"v1\"");
  auto r = run_job(url + " " + std::to_string(content.size()) + "\n", dest, "static", {1, 1, 1}, xfer::EngineOptions{});
  ASSERT_EQ(r.state, xfer::JobState::Done) << r.summary.dump(2);
  EXPECT_TRUE(contents_of(dest + "/c.bin") == content);
  EXPECT_EQ(r.summary["source_restarts"], 0) << r.summary.dump();
  EXPECT_EQ(r.summary["bytes_resumed"], 1 << 20);
  int gets = 0, with_if_range = 0;
  for (const std::string& h : srv.heads())
    if (h.rfind("GET ", 0) == 0) ++gets, with_if_range += h.find("\r\nIf-Range:") != std::string::npos;
  EXPECT_EQ(with_if_range, 1) << "asked once with If-Range, then without";
  EXPECT_EQ(gets, 2);
  fs::remove_all(dest);
}
