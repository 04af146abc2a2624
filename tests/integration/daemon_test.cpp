// xferd end to end: a private dbus-daemon with a system-bus policy, the real
// xferd, nginx on loopback, clients xferctl and busctl (which this project
// did not write).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <sstream>
#include <thread>

#include "daemon.h"
#include "xfer/history.h"
#include "daemon_env.h"
#include "fixture.h"
#include "store.h"
#include "xfer/energy.h"

namespace fs = std::filesystem;
using namespace xtest;

namespace {

// Every interface element of one of xferd's interfaces, comments and layout aside.
std::string interface_xml(const std::string& xml, const std::string& name) {
  std::string s = std::regex_replace(xml, std::regex("<!--[\\s\\S]*?-->"), "");
  size_t b = s.find("<interface name=\"" + name + "\">");
  size_t e = s.find("</interface>", b);
  if (b == std::string::npos || e == std::string::npos) return "";
  s = s.substr(b, e - b);
  s = std::regex_replace(s, std::regex(">\\s+<"), "><");
  return s;
}


std::string slurp_file(const std::string& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST(Daemon, ServesTheCheckedInInterfaceAndNotifiesSystemd) {
  Env env;
  std::string dest = env.dest();
  // A client this project did not write watches the job's signals: busctl
  // as a bus monitor (root). Signals about a job are never broadcast: each
  // goes to its owner's connections alone (here xferctl's, which submitted).
  std::string mon = make_temp_dir("monitor");
  sh("busctl monitor --json=short org.xferd.Xferd1 > " + mon + "/out 2>&1 & echo $! > " + mon + "/pid");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Shell sub = run(bin("xferctl") + " submit --manifest " + env.manifest_file(env.data.manifest(env.nginx.url(false, "/"))) +
                  " --dest " + dest + " --wait --no-progress");
  ASSERT_EQ(sub.status, 0) << sub.out;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  sh("kill $(cat " + mon + "/pid)");
  std::vector<nlohmann::json> changes, finished;
  {
    std::ifstream in(mon + "/out");
    for (std::string line; std::getline(in, line);) {
      nlohmann::json m = nlohmann::json::parse(line, nullptr, false);
      if (!m.is_object() || m.value("type", "") != "signal" || m.value("path", "") != "/org/xferd/Xferd1/job/1") continue;
      EXPECT_NE(m.value("destination", ""), "") << "broadcast: " << line;
      if (m.value("member", "") == "PropertiesChanged") changes.push_back(m["payload"]["data"]);
      if (m.value("member", "") == "Finished") finished.push_back(m["payload"]["data"]);
    }
  }
  auto changed = [&](const std::string& prop, const nlohmann::json& value) {
    for (const auto& c : changes)
      if (c[1].contains(prop) && c[1][prop]["data"] == value) return true;
    return false;
  };
  EXPECT_TRUE(changed("State", "running")) << slurp_file(mon + "/out");
  EXPECT_TRUE(changed("BytesDone", env.data.bytes)) << slurp_file(mon + "/out");
  ASSERT_EQ(finished.size(), 1u) << slurp_file(mon + "/out");
  EXPECT_EQ(finished[0][0], "done");
  EXPECT_EQ(finished[0][1].get<std::string>().rfind("{", 0), 0u);
  // PropertiesChanged names what changed, not every property each time: the
  // job's end announces its state and summary, not its unchanged file count.
  const nlohmann::json* done = nullptr;
  for (const auto& c : changes)
    if (c[1].contains("State") && c[1]["State"]["data"] == "done") done = &c;
  ASSERT_NE(done, nullptr) << slurp_file(mon + "/out");
  EXPECT_FALSE((*done)[1].contains("FilesTotal")) << done->dump();
  EXPECT_TRUE((*done)[1].contains("Summary")) << done->dump();
  std::ifstream in(XFER_SOURCE_DIR "/daemon/org.xferd.Xferd1.xml");
  std::stringstream ref;
  ref << in.rdbuf();
  Shell mgr = run("busctl introspect --xml-interface org.xferd.Xferd1 /org/xferd/Xferd1");
  Shell job = run("busctl introspect --xml-interface org.xferd.Xferd1 /org/xferd/Xferd1/job/1");
  ASSERT_EQ(mgr.status, 0) << mgr.out;
  ASSERT_EQ(job.status, 0) << job.out;
  std::string want_mgr = interface_xml(ref.str(), "org.xferd.Manager1"), want_job = interface_xml(ref.str(), "org.xferd.Job1");
  ASSERT_FALSE(want_mgr.empty());
  ASSERT_FALSE(want_job.empty());
  EXPECT_EQ(interface_xml(mgr.out, "org.xferd.Manager1"), want_mgr);
  EXPECT_EQ(interface_xml(job.out, "org.xferd.Job1"), want_job);
  // The manager object lists the jobs below it.
  Shell tree = run("busctl tree --list org.xferd.Xferd1");
  EXPECT_NE(tree.out.find("/org/xferd/Xferd1/job/1"), std::string::npos) << tree.out;

  // READY, STATUS and the watchdog (WATCHDOG_USEC = 2 s: a ping within a second).
  env.xferd.notifications(1500);
  std::vector<std::string> n = env.xferd.notifications();
  auto has = [&](const std::string& p) {
    for (const auto& x : n)
      if (x.rfind(p, 0) == 0) return true;
    return false;
  };
  EXPECT_TRUE(has("READY=1"));
  EXPECT_TRUE(has("STATUS=0 running, 0 queued, 0 paused")) << ::testing::PrintToString(n);
  EXPECT_TRUE(has("WATCHDOG=1")) << ::testing::PrintToString(n);
  env.xferd.stop();
  EXPECT_TRUE(has("STOPPING=1") || [&] {
    n = env.xferd.notifications(500);
    return has("STOPPING=1");
  }());
}

TEST(Daemon, XferctlAndBusctlSubmissionsAreByteIdenticalAndOwnedByTheCaller) {
  Env env;
  std::string base = env.nginx.url(false, "/");
  // root with xferctl, the default policy (min-energy, kernel layer by affinity)
  std::string d1 = env.dest();
  Shell a = run(bin("xferctl") + " submit --manifest " + env.manifest_file(env.data.manifest(base)) + " --dest " + d1 +
                " --wait --json --label mine");
  ASSERT_EQ(a.status, 0) << a.out;
  nlohmann::json s = nlohmann::json::parse(a.out.substr(a.out.find('{')));
  EXPECT_EQ(s["state"], "done");
  EXPECT_EQ(s["label"], "mine");
  EXPECT_EQ(s["files_ok"], env.data.files.size());
  EXPECT_EQ(s["energy"]["source"].get<std::string>().rfind("model:", 0), 0u);
  expect_identical(env.data, d1);
  expect_no_partials(d1);

  // nobody with busctl, entries as (url, size, sha256), then xferctl watch
  std::string d2 = env.dest(kNobody);
  Shell b = run(as_nobody(busctl_submit(env.data, base, d2, "app-max-throughput")));
  ASSERT_EQ(b.status, 0) << b.out;
  std::string path = object_path(b.out);
  ASSERT_FALSE(path.empty()) << b.out;
  Shell w = run(as_nobody(bin("xferctl") + " watch " + path.substr(path.rfind('/') + 1) + " --json"));
  EXPECT_EQ(w.status, 0) << w.out;
  EXPECT_EQ(job_property(path, "State"), "done");
  EXPECT_EQ(job_property(path, "Owner"), std::to_string(kNobody));
  expect_identical(env.data, d2);
  expect_no_partials(d2);
  for (const auto& f : env.data.files) {
    EXPECT_EQ(owner_of(d2 + "/" + f.name), kNobody) << f.name;
    EXPECT_EQ(owner_of(d1 + "/" + f.name), 0u) << f.name;
  }
  // nobody sees only their own job; root sees both.
  Shell ln = run(as_nobody(bin("xferctl") + " history --json"));
  ASSERT_EQ(ln.status, 0) << ln.out;
  EXPECT_EQ(nlohmann::json::parse(ln.out).size(), 1u) << ln.out;
  Shell lr = run(bin("xferctl") + " history --json");
  EXPECT_EQ(nlohmann::json::parse(lr.out).size(), 2u) << lr.out;
}

TEST(Daemon, PauseResumeCancel) {
  Env env;
  std::string d = env.dest();
  // The video only (about 6 s).
  Shell sub = run(bin("xferctl") + " submit --policy app-min-energy --manifest " + env.manifest_file(slow_video(env)) +
                  " --dest " + d);
  ASSERT_EQ(sub.status, 0) << sub.out;
  std::string path = sub.out.substr(0, sub.out.find('\n'));
  ASSERT_EQ(wait_state(path, {"running"}), "running");
  wait_bytes(path, 2 << 20);
  ASSERT_EQ(run(bin("xferctl") + " pause " + path).status, 0);
  EXPECT_EQ(job_property(path, "State"), "paused");
  uint64_t at_pause = bytes_done(path);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(bytes_done(path), at_pause) << "bytes moved while paused";
  Shell again = run(bin("xferctl") + " pause " + path);
  EXPECT_NE(again.out.find("org.xferd.Xferd1.Error.BadJobState"), std::string::npos) << again.out;
  ASSERT_EQ(run(bin("xferctl") + " resume " + path).status, 0);
  EXPECT_EQ(job_property(path, "State"), "running");
  wait_bytes(path, at_pause + (2 << 20), 20);
  EXPECT_GT(bytes_done(path), at_pause);
  // nobody may neither cancel nor read root's job, nor tell it from a job
  // that does not exist (issue 37: ids could be enumerated)
  Shell other = run(as_nobody(bin("xferctl") + " cancel " + path));
  EXPECT_NE(other.out.find("org.xferd.Xferd1.Error.NoSuchJob"), std::string::npos) << other.out;
  Shell peek = run(as_nobody(bin("xferctl") + " status " + path));
  EXPECT_NE(peek.status, 0);
  EXPECT_NE(peek.out.find("org.xferd.Xferd1.Error.NoSuchJob"), std::string::npos) << peek.out;
  std::string id = path.substr(path.rfind('/') + 1);
  Shell none = run(as_nobody(bin("xferctl") + " cancel 987654"));
  std::string told = other.out;
  told.replace(told.find("no job " + id), 7 + id.size(), "no job 987654");
  EXPECT_EQ(told, none.out);
  ASSERT_EQ(run(bin("xferctl") + " cancel " + path).status, 0);
  Shell w = run(bin("xferctl") + " watch " + path + " --json");
  EXPECT_EQ(w.status, 130) << w.out;
  EXPECT_EQ(job_property(path, "State"), "cancelled");
  // Nothing at the final name; the bytes stay in the .part for a later job.
  for (const auto& f : env.data.files) EXPECT_FALSE(fs::exists(d + "/" + f.name)) << f.name;
}

// Issue 53, finding 7: a job that is not running when it is cancelled (paused
// here; yielded or resumed into the queue the same: its run was retired) has
// its earlier run's .part files removed as a running job's are.
TEST(Daemon, CancelOfAJobThatIsNotRunningRemovesItsPartialFiles) {
  Env env;
  std::string d = env.dest();
  Shell sub = run(bin("xferctl") + " submit --policy app-min-energy --manifest " + env.manifest_file(slow_video(env)) +
                  " --dest " + d);
  ASSERT_EQ(sub.status, 0) << sub.out;
  std::string path = sub.out.substr(0, sub.out.find('\n'));
  wait_bytes(path, 1 << 20);
  ASSERT_EQ(run(bin("xferctl") + " pause " + path).status, 0);
  auto partials = [&] {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(d)) n += e.path().string().find(".part") != std::string::npos;
    return n;
  };
  ASSERT_GT(partials(), 0u) << "the paused job keeps its .part";
  ASSERT_EQ(run(bin("xferctl") + " cancel " + path).status, 0);
  EXPECT_EQ(job_property(path, "State"), "cancelled");
  for (int i = 0; i < 100 && partials() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(partials(), 0u);
  for (const auto& f : env.data.files) EXPECT_FALSE(fs::exists(d + "/" + f.name)) << f.name;
}

TEST(Daemon, KillNineMidJobThenRestartCompletesByteIdentical) {
  Env env;
  std::string d = env.dest(kNobody);
  std::string m = env.data.manifest(env.nginx.url(false, "/slow/"));
  Shell sub = run(as_nobody(bin("xferctl") + " submit --manifest " + env.manifest_file(m) + " --dest " + d));
  ASSERT_EQ(sub.status, 0) << sub.out;
  std::string path = sub.out.substr(0, sub.out.find('\n'));
  wait_bytes(path, env.data.bytes / 3);
  // The video's progress record is there (it is rewritten every 200 ms).
  std::string video;
  for (const auto& f : env.data.files)
    if (f.name.find("video") != std::string::npos) video = f.name;
  for (int i = 0; i < 50 && !fs::exists(d + "/" + video + ".part.progress"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  uint64_t small = 0;
  for (const auto& f : env.data.files)
    if (f.name != video) small += f.size;
  uint64_t before = bytes_done(path);
  ASSERT_LT(before, env.data.bytes) << "finished before the kill";
  env.xferd.kill9();
  std::cout << "[ kill -9 ] at " << before << " of " << env.data.bytes << " bytes\n";
  env.xferd.start();
  EXPECT_NE(env.xferd.log().find("job 1: carried on after a restart"), std::string::npos) << env.xferd.log();
  // And a clean stop (SIGTERM, as systemctl stop or restart) in the middle: the job checkpoints and carries on again.
  wait_bytes(path, before + (2 << 20), 30);
  env.xferd.stop();
  EXPECT_NE(env.xferd.log().find("job 1: stopping for a daemon restart"), std::string::npos) << env.xferd.log();
  env.xferd.start();
  Shell w = run(as_nobody(bin("xferctl") + " watch 1 --json"));
  ASSERT_EQ(w.status, 0) << w.out << env.xferd.log();
  nlohmann::json s = nlohmann::json::parse(w.out.substr(w.out.find('{')));
  std::cout << "[ restart ] " << s["state"] << ": " << s["bytes_resumed"] << " bytes resumed from the .part files, "
            << s["bytes_fetched"] << " fetched after the restart, " << s["files_ok"] << " files ok\n";
  EXPECT_EQ(s["state"], "done");
  EXPECT_EQ(s["files_skipped"].get<uint64_t>() + s["files_ok"].get<uint64_t>(), env.data.files.size());
  EXPECT_GT(s["bytes_resumed"].get<uint64_t>(), small) << "the video's .part was not resumed";
  EXPECT_LT(s["bytes_fetched"].get<uint64_t>(), env.data.bytes);
  expect_identical(env.data, d);
  expect_no_partials(d);
  for (const auto& f : env.data.files) EXPECT_EQ(owner_of(d + "/" + f.name), kNobody) << f.name;
  // A finished job read back from the store after a restart shows its totals.
  env.xferd.stop();
  env.xferd.start();
  EXPECT_EQ(job_property(path, "State"), "done");
  EXPECT_EQ(job_property(path, "FilesTotal"), std::to_string(env.data.files.size()));
  EXPECT_EQ(job_property(path, "FilesDone"), std::to_string(env.data.files.size()));
  EXPECT_EQ(job_property(path, "BytesTotal"), std::to_string(env.data.bytes));
  // Every interval of both runs went to the history (0.5 s intervals over
  // several seconds), one run per start.
  env.xferd.stop();
  auto history = xfer::hla::open_history(env.xferd.state_dir + "/history.db", {.read_only = true});
  xfer::hla::HistoryData h = history->read();
  std::vector<std::string> outcomes;
  for (const auto& r : h.runs)
    if (r.job_id == 1 && r.tool == "xferd") outcomes.push_back(r.outcome);
  size_t rows = 0;
  for (const auto& i : h.intervals) rows += h.run_of(i) && h.run_of(i)->job_id == 1;
  std::cout << "[ history ] " << rows << " interval rows for job 1 over " << outcomes.size() << " runs\n";
  // kill -9 left its run "running" (cut off: the analysis drops it), the
  // clean stop marked its run "interrupted", the last run finished.
  EXPECT_EQ(outcomes, (std::vector<std::string>{"running", "interrupted", "done"}));
  EXPECT_GE(rows, 4u);
}

TEST(Daemon, TwentyConcurrentJobsFromTwoUids) {
  // /slow/ at 256 KB/s per connection: each job's images take about 10 s, and
  // the twenty submissions go at once (one after another, under the
  // sanitizers and a busy machine, took over 10 s: at most 14 ran together).
  Env env("[limits]\nmax_running_jobs = 20\n", "256k");
  std::string base = env.nginx.url(false, "/slow/");
  std::vector<std::pair<std::string, uid_t>> jobs;  // path, owner
  std::vector<std::string> dests, only;
  std::string m;  // each job: the html files and the images
  for (const auto& f : env.data.files)
    if (f.name.find("video") == std::string::npos) {
      m += base + f.name + " " + std::to_string(f.size) + " sha256:" + f.sha256 + "\n";
      only.push_back(f.name);
    }
  std::string mf = env.manifest_file(m);
  std::vector<std::string> cmds;
  for (int i = 0; i < 20; ++i) {
    uid_t who = i % 2 ? kNobody : 0;
    dests.push_back(env.dest(who));
    std::string cmd = bin("xferctl") + " submit --manifest " + mf + " --dest " + dests.back() +
                      (who ? " --policy app-energy-efficient" : " --policy app-max-throughput");
    cmds.push_back(who ? as_nobody(cmd) : cmd);
  }
  std::vector<Shell> submitted(cmds.size());
  {
    std::vector<std::thread> callers;
    for (size_t i = 0; i < cmds.size(); ++i) callers.emplace_back([&, i] { submitted[i] = run(cmds[i]); });
    for (auto& t : callers) t.join();
  }
  for (size_t i = 0; i < submitted.size(); ++i) {
    ASSERT_EQ(submitted[i].status, 0) << submitted[i].out;
    jobs.emplace_back(submitted[i].out.substr(0, submitted[i].out.find('\n')), i % 2 ? kNobody : 0);
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& [path, who] = jobs[i];
    std::string st = wait_state(path, {"done", "failed", "cancelled"}, 120);
    EXPECT_EQ(st, "done") << path << "\n" << env.xferd.log().substr(0, 4000);
    EXPECT_EQ(job_property(path, "Owner"), std::to_string(who));
    for (const auto& n : only) EXPECT_EQ(owner_of(dests[i] + "/" + n), who) << dests[i] << "/" << n;
    expect_identical(env.data, dests[i], only);
    expect_no_partials(dests[i]);
  }
  // They ran at once: xferd told systemd "20 running" at some point.
  int most = 0;
  for (const auto& n : env.xferd.notifications())
    if (n.rfind("STATUS=", 0) == 0) most = std::max(most, std::atoi(n.c_str() + 7));
  std::cout << "[ concurrency ] at most " << most << " jobs running at once\n";
  EXPECT_EQ(most, 20);
}

TEST(Daemon, BadInputGetsAClearErrorAndWritesNothing) {
  Env env("[limits]\nmax_entries_per_job = 50\nmax_jobs_per_user = 3\nmax_entries_per_user = 40\n");
  std::string mine = env.dest(kNobody), roots = env.dest();
  std::string ok = env.nginx.url(false, "/") + env.data.files[0].name;
  // gdbus and dbus-send print the error's name (busctl prints only its message).
  const std::string call = "gdbus call --system --dest org.xferd.Xferd1 --object-path /org/xferd/Xferd1 --method org.xferd.Manager1.";
  const std::string send = "dbus-send --system --print-reply --dest=org.xferd.Xferd1 /org/xferd/Xferd1 org.xferd.Manager1.";
  auto gv = [](const std::string& v) { return shq("'" + v + "'"); };  // a GVariant string literal, shell-quoted
  auto submit1 = [&](const std::string& url, const std::string& dest, const std::string& policy,
                     const std::string& options = "{}") {
    return call + "Submit " + shq("[('" + url + "', uint64 0, '')]") + " " + gv(dest) + " " + gv(policy) + " " + shq(options);
  };
  std::string big;
  for (int i = 0; i < 51; ++i) big += ok + "?n=" + std::to_string(i) + "\\n";
  struct Case {
    std::string what, cmd, error;
  };
  std::vector<Case> cases = {
      {"file:// URL", submit1("file:///etc/passwd", mine, ""), "org.xferd.Xferd1.Error.UnsupportedURL"},
      {"gopher:// URL", submit1("gopher://127.0.0.1/1/x", mine, ""), "org.xferd.Xferd1.Error.UnsupportedURL"},
      {"destination the caller may not write (root's)", submit1(ok, roots, ""),
       "org.xferd.Xferd1.Error.DestinationNotWritable"},
      {"destination that does not exist", submit1(ok, mine + "/nope", ""), "org.xferd.Xferd1.Error.DestinationNotWritable"},
      {"relative destination", submit1(ok, "tmp/in", ""), "org.xferd.Xferd1.Error.DestinationNotWritable"},
      {"../ in the name (encoded slashes)", submit1(env.nginx.url(false, "/a/..%2F..%2Fetc%2Fpasswd"), mine, ""),
       "org.xferd.Xferd1.Error.BadFileName"},
      {"name '..' (encoded dots)", submit1(env.nginx.url(false, "/a/%2E%2E"), mine, ""), "org.xferd.Xferd1.Error.BadFileName"},
      {"manifest over the entry limit (51 > 50)", call + "SubmitManifest " + gv(big) + " " + gv(mine) + " \"''\" '{}'",
       "org.xferd.Xferd1.Error.TooManyEntries"},
      {"wrong argument types (SubmitManifest with two strings)", send + "SubmitManifest string:a string:b",
       "org.xferd.Xferd1.Error.InvalidArguments"},
      {"wrong argument types (entries as an array of strings)",
       send + "Submit array:string:" + ok + " string:" + mine + " string:", "org.xferd.Xferd1.Error.InvalidArguments"},
      {"option of the wrong type (target_pct as a string)",
       submit1(ok, mine, "throughput-target", "{'target_pct': <'high'>}"), "org.xferd.Xferd1.Error.InvalidArguments"},
      {"unknown option", submit1(ok, mine, "", "{'speed': <9.0>}"), "org.xferd.Xferd1.Error.InvalidArguments"},
      {"unknown policy", submit1(ok, mine, "warp-speed"), "org.xferd.Xferd1.Error.UnknownPolicy"},
      {"policy the caller may not use (kernel layer, not root)", submit1(ok, mine, "min-energy"),
       "org.xferd.Xferd1.Error.PolicyForbidden"},
      {"Reload by a user", call + "Reload", "org.xferd.Xferd1.Error.NotPrivileged"},
      {"a job that does not exist",
       "gdbus call --system --dest org.xferd.Xferd1 --object-path /org/xferd/Xferd1/job/999 --method org.xferd.Job1.Cancel",
       "org.xferd.Xferd1.Error.NoSuchJob"},
  };
  for (const Case& c : cases) {
    Shell r = run(as_nobody(c.cmd));
    EXPECT_NE(r.status, 0) << c.what;
    EXPECT_NE(r.out.find(c.error), std::string::npos) << c.what << ": " << r.out;
    std::string msg = r.out;
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    std::cout << "[ bad input ] " << c.what << "\n    -> " << c.error << ": " << msg << "\n";
  }
  // The per-user limits: two unfinished jobs of 15 files (slow); a third of 15
  // would pass 40 files, and after a one-file third job a fourth passes 3 jobs.
  std::string slow = env.nginx.url(false, "/slow/");
  std::vector<std::string> paths;
  for (int i = 0; i < 2; ++i) {
    std::string d = env.dest(kNobody);
    Shell r = run(as_nobody("busctl call org.xferd.Xferd1 /org/xferd/Xferd1 org.xferd.Manager1 SubmitManifest 'sssa{sv}' " +
                            shq(env.data.manifest(slow)) + " " + shq(d) + " '' 0"));
    ASSERT_EQ(r.status, 0) << r.out;
    paths.push_back(object_path(r.out));
  }
  std::string d3 = env.dest(kNobody);
  Shell many = run(as_nobody(call + "SubmitManifest " + gv(env.data.manifest(slow)) + " " + gv(d3) + " \"''\" '{}'"));
  EXPECT_NE(many.out.find("org.xferd.Xferd1.Error.TooManyEntries"), std::string::npos) << many.out;
  std::cout << "[ bad input ] 45 files in unfinished jobs (limit 40 per user)\n    -> " << many.out;
  EXPECT_TRUE(fs::is_empty(d3));
  std::string video;
  for (const auto& f : env.data.files)
    if (f.name.find("video") != std::string::npos) video = f.name;
  Shell one = run(as_nobody(submit1(slow + video, d3, "")));
  ASSERT_EQ(one.status, 0) << one.out;
  paths.push_back(object_path(one.out));
  Shell fourth = run(as_nobody(submit1(ok, mine, "")));
  EXPECT_NE(fourth.out.find("org.xferd.Xferd1.Error.TooManyJobs"), std::string::npos) << fourth.out;
  std::cout << "[ bad input ] a fourth unfinished job (limit 3)\n    -> " << fourth.out;
  for (const auto& p : paths) run(bin("xferctl") + " cancel " + p);
  // Nothing was written by any refused call.
  EXPECT_TRUE(fs::is_empty(mine)) << mine;
  EXPECT_TRUE(fs::is_empty(roots)) << roots;
  EXPECT_FALSE(fs::exists("/etc/passwd.part"));
}

TEST(Daemon, BrokenConfigStopsStartupAndReloadKeepsTheOldOne) {
  PrivateBus bus;
  {
    Xferd broken("[limits]\nmax_jobs_per_user = 4\nmax_channels = \"lots\"\n");
    Shell check = run(bin("xferd") + " --check-config --config " + broken.config_file + " --config-dir " + broken.config_dir);
    EXPECT_EQ(check.status, 1);
    EXPECT_NE(check.out.find(broken.config_file + ":3: [limits] max_channels takes an integer, not \"lots\""), std::string::npos)
        << check.out;
    Shell start = run(bin("xferd") + " --config " + broken.config_file + " --config-dir " + broken.config_dir +
                      " --state-dir " + broken.state_dir);
    EXPECT_EQ(start.status, 1);
    EXPECT_NE(start.out.find(":3: [limits] max_channels takes an integer, not \"lots\"; not started"), std::string::npos)
        << start.out;
    EXPECT_FALSE(fs::exists(broken.state_dir + "/xferd.db"));  // nothing touched
  }
  Xferd x("[kernel]\nmode = \"off\"\n");
  x.start();
  std::string dropin = x.config_dir + "/50-lab.conf";
  std::ofstream(dropin) << "[policy.lab]\nalgorithm = \"max-throughput\"\nmax_channels = -3\n";
  Shell r = run("gdbus call --system --dest org.xferd.Xferd1 --object-path /org/xferd/Xferd1 --method org.xferd.Manager1.Reload");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("org.xferd.Xferd1.Error.ConfigInvalid"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(dropin + ":3: [policy.lab] max_channels must be between 1 and 4096, not -3"), std::string::npos)
      << r.out;
  Shell p = run(bin("xferctl") + " policies --json");
  ASSERT_EQ(p.status, 0) << p.out;
  EXPECT_EQ(nlohmann::json::parse(p.out).size(), 9u) << "the configuration in use changed";
  std::ofstream(dropin) << "[policy.lab]\nalgorithm = \"max-throughput\"\nmax_channels = 3\n"
                           "[policy.app-min-energy]\nalgorithm = \"min-energy\"\n"
                           "[policy.min-energy]\nalgorithm = \"min-energy\"\nkernel = true\n";
  r = run("busctl call org.xferd.Xferd1 /org/xferd/Xferd1 org.xferd.Manager1 Reload");
  EXPECT_EQ(r.status, 0) << r.out;
  p = run(bin("xferctl") + " policies --json");
  nlohmann::json pol = nlohmann::json::parse(p.out);
  EXPECT_EQ(pol.size(), 3u) << p.out;
  EXPECT_EQ(pol[0]["name"], "app-min-energy");
}

TEST(Daemon, XferctlSaysWhenTheDaemonIsNotRunning) {
  PrivateBus bus;
  Shell r = run(bin("xferctl") + " list");
  EXPECT_EQ(r.status, 4);
  EXPECT_NE(r.out.find("xferd is not running: nobody owns org.xferd.Xferd1 on DBUS_SYSTEM_BUS_ADDRESS=" + bus.address),
            std::string::npos)
      << r.out;
  setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/socket", 1);
  r = run(bin("xferctl") + " list");
  EXPECT_EQ(r.status, 4);
  EXPECT_NE(r.out.find("cannot connect to DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent/socket"), std::string::npos) << r.out;
}

// xferd-hla.service (xfer-hla analyze, then reload xferd) and its daily timer.
TEST(Systemd, HlaServiceAndTimerVerify) {
  Shell r = run("systemd-analyze verify --man=no " XFER_BUILD_DIR "/systemd/verify/xferd-hla.service " XFER_BUILD_DIR
                "/systemd/verify/xferd-hla.timer");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "") << "warnings from systemd-analyze verify";
  std::ifstream in(XFER_SOURCE_DIR "/systemd/xferd-hla.service.in");
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_NE(s.str().find("analyze --history"), std::string::npos);
  EXPECT_NE(s.str().find("ExecStartPre=-@XFER_HLA_BIN@ compact --history"), std::string::npos);
  EXPECT_NE(s.str().find("reload xferd.service"), std::string::npos);
}

TEST(Systemd, UnitVerifies) {
  // The unit with the build tree's xferd (ExecStart must exist for verify).
  Shell r = run("systemd-analyze verify --man=no " XFER_BUILD_DIR "/systemd/verify/xferd.service " XFER_BUILD_DIR
                "/systemd/verify/xferd-metrics.socket");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "") << "warnings from systemd-analyze verify";
  // The hardening the issue asks for is there.
  std::ifstream in(XFER_SOURCE_DIR "/systemd/xferd.service.in");
  std::stringstream s;
  s << in.rdbuf();
  for (const char* k : {"Type=notify", "WatchdogSec=", "ProtectSystem=strict", "ReadWritePaths=", "CapabilityBoundingSet=",
                        "NoNewPrivileges=yes", "SystemCallFilter="})
    EXPECT_NE(s.str().find(k), std::string::npos) << k;
  // The tmpfiles.d snippet parses.
  std::string root = make_temp_dir("tmpfiles-root");
  Shell t = run("systemd-tmpfiles --root=" + root + " --create " XFER_SOURCE_DIR "/systemd/xferd.tmpfiles");
  EXPECT_EQ(t.status, 0) << t.out;
  EXPECT_EQ(t.out, "");
  EXPECT_TRUE(fs::is_directory(root + "/var/lib/xferd"));
  EXPECT_EQ(fs::status(root + "/var/lib/xferd").permissions() & fs::perms::all, fs::perms::owner_all);
  fs::remove_all(root);
}

// The power model `xferctl calibrate` writes is a configuration key
// ([energy] power_model) the daemon's jobs are measured with: a model of a
// constant 40 W (idle only) gives a job 40 W x its time, and its report names
// the file. A malformed model stops xferd (and --check-config) with the file
// and line; no file at all means the paper's coefficients, said in the log.
TEST(Daemon, ACalibratedPowerModelReachesItsJobs) {
  std::string dir = make_temp_dir("model");
  std::string model = dir + "/power-model.toml";
  xfer::PowerCoefficients c;
  c.cpu_a = c.cpu_b = c.cpu_c = 0;
  c.idle_watts = 40, c.idle_core_watts = 0;  // measured whole, as a calibration does
  c.origin = "test: a constant 40 W";
  c.save(model);
  {
    Env env("[energy]\npower_model = \"" + model + "\"\n", "4m");
    Dataset images;
    for (const auto& f : env.data.files)
      if (f.name.rfind("image-", 0) == 0) images.files.push_back(f);
    std::string dest = env.dest();
    Shell a = run(bin("xferctl") + " submit --manifest " +
                  env.manifest_file(images.manifest(env.nginx.url(false, "/slow/"))) + " --dest " + dest +
                  " --policy app-min-energy --wait --json");  // few connections: the job lasts long enough to measure
    ASSERT_EQ(a.status, 0) << a.out;
    nlohmann::json s = nlohmann::json::parse(a.out.substr(a.out.find('{')));
    ASSERT_EQ(s["state"], "done");
    ASSERT_EQ(s["energy"]["source"], "model:cpu") << s["energy"].dump();
    EXPECT_NE(s["energy"]["basis"].get<std::string>().find(model), std::string::npos) << s["energy"].dump();
    double secs = s["seconds"].get<double>(), joules = s["energy"]["joules"].get<double>();
    std::printf("[ model ] %.3f J over %.3f s: %.1f W (the file says 40 W)\n", joules, secs, joules / secs);
    ASSERT_GT(secs, 0.3);
    EXPECT_NEAR(joules / secs, 40, 4);
  }
  std::ofstream(model, std::ios::app) << "cpu_a = \"many\"\n";
  std::string conf = dir + "/xferd.conf";
  std::ofstream(conf) << "[energy]\npower_model = \"" << model << "\"\n";
  Shell bad = run(bin("xferd") + " --check-config --config " + conf + " --config-dir " + dir + "/none");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find(model + ":"), std::string::npos) << bad.out;
  EXPECT_EQ(bad.out.find("configuration OK"), std::string::npos) << bad.out;
  std::ofstream(conf) << "[energy]\npower_model = \"" << dir << "/none.toml\"\n";
  Shell none = run(bin("xferd") + " --check-config --config " + conf + " --config-dir " + dir + "/none");
  EXPECT_EQ(none.status, 0) << none.out;
}

// Issue 53, finding 10: --check-config refuses what the start refuses, with
// the same words: a [metrics] textfile in a directory any user may write,
// a state directory any user may write. Before, it said OK and the daemon
// then did not start.
TEST(Daemon, CheckConfigRefusesWhatTheStartRefuses) {
  std::string dir = make_temp_dir("checkconf"), open_dir = dir + "/open", state = dir + "/state";
  fs::create_directory(open_dir);
  chmod(open_dir.c_str(), 0777);  // no sticky bit: anyone may replace what is in it
  fs::create_directory(state);
  std::string conf = dir + "/xferd.conf";
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {"[metrics]\ntextfile = \"" + open_dir + "/xferd.prom\"\n[daemon]\nstate_dir = \"" + state + "\"\n",
            "[metrics] textfile's directory"},
           {"[daemon]\nstate_dir = \"" + open_dir + "\"\n", "state directory"}}) {
    std::ofstream(conf) << text;
    std::string args = " --config " + conf + " --config-dir " + dir + "/none";
    Shell check = run(bin("xferd") + " --check-config" + args);
    EXPECT_EQ(check.status, 1) << check.out;
    EXPECT_NE(check.out.find(says), std::string::npos) << check.out;
    EXPECT_EQ(check.out.find("configuration OK"), std::string::npos) << check.out;
    // The start refuses it with the same words, before it opens any bus.
    Shell start = run("timeout 20 " + bin("xferd") + args + " --bus-address unix:path=" + dir + "/no-bus");
    EXPECT_EQ(start.status, 1) << start.out;
    EXPECT_NE(start.out.find(says), std::string::npos) << start.out;
  }
  std::ofstream(conf) << "[daemon]\nstate_dir = \"" << state << "\"\n";
  Shell ok = run(bin("xferd") + " --check-config --config " + conf + " --config-dir " + dir + "/none");
  EXPECT_EQ(ok.status, 0) << ok.out;
  fs::remove_all(dir);
}

// One option table: a value out of its range is refused with the same words
// by xferctl run, xferctl submit, the config (--check-config) and D-Bus.
TEST(Daemon, AnOptionOutOfRangeGetsTheSameWordsEverywhere) {
  const std::string words = "target_pct must be between 1 and 100, not 150";
  Env env;
  std::string m = env.manifest_file(env.data.manifest(env.nginx.url(false, "/")));
  std::string dest = env.dest();
  Shell run_cli = run(bin("xferctl") + " run --manifest " + m + " --dest " + dest +
                      " --sla throughput-target --target-pct 150 --no-progress");
  EXPECT_NE(run_cli.status, 0);
  EXPECT_NE(run_cli.out.find(words), std::string::npos) << run_cli.out;
  Shell submit_cli = run(bin("xferctl") + " submit --manifest " + m + " --dest " + dest +
                         " --policy throughput-target --target-pct 150");
  EXPECT_NE(submit_cli.status, 0);
  EXPECT_NE(submit_cli.out.find(words), std::string::npos) << submit_cli.out;
  Shell bus = run("busctl call org.xferd.Xferd1 /org/xferd/Xferd1 org.xferd.Manager1 SubmitManifest 'sssa{sv}' " +
                  shq(env.data.manifest(env.nginx.url(false, "/"))) + " " + shq(dest) +
                  " throughput-target 1 target_pct d 150");
  EXPECT_NE(bus.status, 0);
  EXPECT_NE(bus.out.find(words), std::string::npos) << bus.out;
  std::string dir = make_temp_dir("optconf");
  std::ofstream(dir + "/xferd.conf") << "[policy.half]\nalgorithm = \"throughput-target\"\ntarget_pct = 150\n";
  Shell conf = run(bin("xferd") + " --check-config --config " + dir + "/xferd.conf --config-dir " + dir + "/none");
  EXPECT_EQ(conf.status, 1);
  EXPECT_NE(conf.out.find(dir + "/xferd.conf:3: [policy.half] " + words), std::string::npos) << conf.out;
  // Nothing was fetched by any of them.
  EXPECT_TRUE(fs::is_empty(dest));
}
