// Issue 37, end to end: what a local user could still do to a root daemon
// (a job that never ends, a frozen loop, the daemon's descriptors, a table
// that crashes it, files it trusted, a journal that writes anywhere, root's
// reserved blocks, unbounded echoes). Each test fails on the code before the
// fix and passes after.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <sstream>
#include <thread>

#include "daemon.h"
#include "daemon_env.h"
#include "fixture.h"
#include "xfer/hla.h"

namespace fs = std::filesystem;
using namespace xtest;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Waits until xferd has used (almost) no CPU for a second: its work, such
// as a checksum on a thread, has ended. False after `seconds`.
bool wait_idle(const Xferd& x, double seconds) {
  auto t0 = std::chrono::steady_clock::now();
  while (seconds_since(t0) < seconds) {
    double before = x.cpu_seconds();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    if (x.cpu_seconds() - before < 0.05) return true;
  }
  return false;
}

// The descriptor xferd holds on `dir` (-1: none).
int fd_of(pid_t pid, const std::string& dir) {
  std::string base = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& e : fs::directory_iterator(base)) {
    std::error_code ec;
    if (fs::read_symlink(e.path(), ec) == fs::path(dir)) return std::stoi(e.path().filename().string());
  }
  return -1;
}

// Processes whose parent is `parent`, in state T (stopped).
std::vector<pid_t> stopped_children(pid_t parent) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  while (dirent* e = d ? readdir(d) : nullptr) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string st = file_bytes(std::string("/proc/") + e->d_name + "/stat");
    size_t close = st.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream in(st.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    in >> state >> ppid;
    if (ppid == parent && state == 'T') out.push_back(pid_t(std::stoi(e->d_name)));
  }
  if (d) closedir(d);
  return out;
}

}  // namespace

// Resume can end a job at once (its last file was checked while it was
// paused): the job is done, and stays done. Before: Resume set it running
// again after the end, so it never finished and Cancel changed nothing.
TEST(HostileUser, AnEndIsFinalWhateverResumeFinds) {
  Env env;
  std::string dest = env.dest(kNobody);
  // A file at the final name, the caller's, whose sha256 is checked on a
  // thread (8 GiB of holes: seconds) and does not match: the file fails,
  // the job is done.
  std::string path = submit_sparse_mismatch(env, dest, "big.bin", 8ull << 30);
  ASSERT_FALSE(path.empty());
  ASSERT_EQ(wait_state(path, {"running", "done", "failed"}, 30), "running");
  std::string id = path.substr(path.rfind('/') + 1);
  Shell p = run(as_nobody(bin("xferctl") + " pause " + id));
  ASSERT_EQ(p.status, 0) << p.out << " (the check ended before the pause: make big.bin larger)";
  ASSERT_TRUE(wait_idle(env.xferd, 60)) << "the checksum did not end";
  EXPECT_EQ(job_property(path, "State"), "paused");
  // A paused job holds no slot (issue 39): resumed, it starts again from the
  // queue and checks the file again.
  Shell r = run(as_nobody(bin("xferctl") + " resume " + id));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(wait_state(path, {"done", "failed", "cancelled"}, 90), "done");
  EXPECT_NE(failure_of(summary_of(path), "big.bin").find("sha256"), std::string::npos) << summary_of(path).dump(1);
  // An end is final: neither Pause nor Cancel changes it.
  for (const char* verb : {"pause", "cancel", "resume"}) {
    Shell again = run(as_nobody(bin("xferctl") + " " + verb + " " + id));
    EXPECT_NE(again.status, 0) << verb << ": " << again.out;
    EXPECT_NE(again.out.find("BadJobState"), std::string::npos) << verb << ": " << again.out;
  }
  EXPECT_EQ(job_property(path, "State"), "done");
  // A thousand quick Pause / Resume pairs on a short job end done too.
  std::string d2 = env.dest(kNobody);
  std::string p2 = submit_as_nobody(env, env.data.manifest(env.nginx.url(false, "/")), d2);
  std::string id2 = p2.substr(p2.rfind('/') + 1);
  sd_bus* bus = nullptr;
  ASSERT_GE(sd_bus_open_system(&bus), 0);
  for (int i = 0; i < 1000; ++i)
    for (const char* m : {"Pause", "Resume"}) {
      sd_bus_error e = SD_BUS_ERROR_NULL;
      sd_bus_call_method(bus, "org.xferd.Xferd1", p2.c_str(), "org.xferd.Job1", m, &e, nullptr, "");
      sd_bus_error_free(&e);
    }
  sd_bus_flush_close_unref(bus);
  run(as_nobody(bin("xferctl") + " resume " + id2));  // whichever came last
  EXPECT_EQ(wait_state(p2, {"done", "failed", "cancelled"}, 60), "done");
  const nlohmann::json s2 = summary_of(p2);
  EXPECT_TRUE(s2.contains("failed") && s2["failed"].empty()) << s2.dump(1) << env.xferd.log();
  expect_identical(env.data, d2);
}

// A caller that stops its own check (the child that opens its destination
// as the caller) makes only its own Submit wait; root's calls and jobs go
// on. Before: the loop waited in poll() for 10 s, and everyone with it.
TEST(HostileUser, AStoppedCheckCostsOnlyItsCaller) {
  // A user no other test runs as (kill(-1) below reaches only this test's
  // processes) with a passwd entry (dbus-daemon drops a uid it cannot name).
  const passwd* pw = getpwnam("games");
  if (!pw) GTEST_SKIP() << "no user 'games' here";
  const uid_t kUid = pw->pw_uid;
  const gid_t kGid = pw->pw_gid;
  Env env;
  std::string dest = env.dest(kUid);
  pid_t xferd = env.xferd.pid();
  std::string url = env.nginx.url(false, "/") + env.data.files[0].name;
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t helper = fork();
  if (helper == 0) {
    // The hostile caller: Submit, then stop every process of its own uid (the
    // sender is spared) until one of xferd's children is caught, then wait
    // for the reply.
    close(pipefd[0]);
    if (setgroups(0, nullptr) != 0 || setresgid(kGid, kGid, kGid) != 0 || setresuid(kUid, kUid, kUid) != 0) _exit(3);
    sd_bus* bus = nullptr;
    if (sd_bus_open_system(&bus) < 0) _exit(4);
    std::string answer = "not caught";
    for (int attempt = 0; attempt < 200; ++attempt) {
      sd_bus_message* m = nullptr;
      sd_bus_message_new_method_call(bus, &m, "org.xferd.Xferd1", "/org/xferd/Xferd1", "org.xferd.Manager1", "Submit");
      sd_bus_message_append(m, "a(sts)ssa{sv}", 1, url.c_str(), uint64_t(0), "", dest.c_str(), "", 0);
      sd_bus_message* reply = nullptr;
      sd_bus_call_async(
          bus, nullptr, m,
          [](sd_bus_message* r, void* ud, sd_bus_error*) {
            *static_cast<sd_bus_message**>(ud) = sd_bus_message_ref(r);
            return 0;
          },
          &reply, 30 * 1000000ull);
      sd_bus_message_unref(m);
      sd_bus_flush(bus);
      auto t0 = std::chrono::steady_clock::now();
      bool caught = false;
      while (!caught && seconds_since(t0) < 0.3) {
        for (int i = 0; i < 200; ++i) kill(-1, SIGSTOP);  // many sweeps for each look at /proc (the slow part)
        caught = !stopped_children(xferd).empty();
      }
      // The reply comes at once unless the check was caught before it
      // answered (a child caught on its way out is killed by xferd).
      auto t1 = std::chrono::steady_clock::now();
      while (!reply && seconds_since(t1) < 1)
        if (sd_bus_process(bus, nullptr) == 0) sd_bus_wait(bus, 100000);
      if (caught && !reply) {
        if (write(pipefd[1], "caught\n", 7) != 7) _exit(6);
        while (!reply && seconds_since(t1) < 30)
          if (sd_bus_process(bus, nullptr) == 0) sd_bus_wait(bus, 100000);
        const sd_bus_error* e = reply ? sd_bus_message_get_error(reply) : nullptr;
        answer = std::to_string(seconds_since(t1)) + "|" + (e && e->name ? e->name : "(no error)") + "|" +
                 (e && e->message ? e->message : "");
        sd_bus_message_unref(reply);
        break;
      }
      while (!reply && seconds_since(t1) < 30)
        if (sd_bus_process(bus, nullptr) == 0) sd_bus_wait(bus, 100000);
      if (getenv("XFER_TEST_DEBUG"))
        fprintf(stderr, "attempt %d: caught %d after the answer\n", attempt, int(caught));
      sd_bus_message_unref(reply);
      for (int i = 0; i < 50 && !stopped_children(xferd).empty(); ++i) usleep(20000);
    }
    ssize_t n = write(pipefd[1], answer.data(), answer.size());
    _exit(n > 0 ? 0 : 5);
  }
  close(pipefd[1]);
  // While the hostile caller's check is stopped, root's calls are answered
  // at once and root's job completes.
  std::string answer(4096, '\0');
  size_t got = 0;
  auto read_more = [&] {
    ssize_t n = read(pipefd[0], answer.data() + got, answer.size() - got);
    if (n > 0) got += size_t(n);
    return n > 0;
  };
  ASSERT_TRUE(read_more() && answer.rfind("caught\n", 0) == 0) << "the hostile caller never caught a check";
  ASSERT_FALSE(stopped_children(xferd).empty());
  double slowest = 0;
  for (int i = 0; i < 5; ++i) {
    auto t = std::chrono::steady_clock::now();
    Shell l = run("busctl --timeout=30 call org.xferd.Xferd1 /org/xferd/Xferd1 org.xferd.Manager1 ListJobs");
    EXPECT_EQ(l.status, 0) << l.out;
    slowest = std::max(slowest, seconds_since(t));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_LT(slowest, 2.0) << "root's ListJobs waited for the stopped check";
  std::printf("while a check is stopped: root's slowest ListJobs %.3f s\n", slowest);
  std::string rdest = env.dest();
  Dataset two;
  two.files = {env.data.files[1], env.data.files[2]};
  Shell r = run(bin("xferctl") + " submit --wait --no-progress --manifest " +
                env.manifest_file(two.manifest(env.nginx.url(false, "/"))) + " --dest " + rdest);
  EXPECT_EQ(r.status, 0) << r.out;
  expect_identical(two, rdest);
  EXPECT_FALSE(stopped_children(xferd).empty()) << "the stopped check was gone before root's job ended";
  // The hostile caller gets its own answer: given up after 10 s.
  while (read_more()) {
  }
  close(pipefd[0]);
  answer.resize(got);
  int st = 0;
  waitpid(helper, &st, 0);
  std::printf("the hostile caller's own Submit: %s\n", answer.c_str());
  EXPECT_NE(answer.find("org.xferd.Xferd1.Error.Destination"), std::string::npos) << answer;
  EXPECT_NE(answer.find("did not answer within 10 s"), std::string::npos) << answer;
  // The stopped child was killed and reaped: no zombie, no stopped process left.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(stopped_children(xferd).empty());
}

// The check's child holds none of xferd's descriptors, and no /proc path is
// a destination or a CA file: a directory another user's job has open
// inside that user's 0700 tree stays out of reach. Before: nobody wrote into
// it through /proc/self/fd/N.
TEST(HostileUser, TheDaemonsDescriptorsNeverReachACaller) {
  Env env;
  std::string top = env.dest();  // root's, 0700
  chmod(top.c_str(), 0700);
  std::string shared = top + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0777), 0);
  chmod(shared.c_str(), 0777);  // world-writable, but nobody cannot reach it by path
  std::string root_job = run(bin("xferctl") + " submit --manifest " +
                             env.manifest_file(env.data.manifest(env.nginx.url(false, "/slow/"))) + " --dest " + shared)
                             .out;
  std::string rpath = path_in(root_job);
  ASSERT_FALSE(rpath.empty()) << root_job;
  wait_bytes(rpath, 1);
  int n = fd_of(env.xferd.pid(), shared);
  ASSERT_GE(n, 0) << "xferd holds no descriptor on " << shared;
  int store = fd_of(env.xferd.pid(), env.xferd.state_dir + "/xferd.db");
  // A name root's job does not write (else the clash would refuse it first).
  std::string m = env.manifest_file(env.nginx.url(false, "/") + "probe.bin\n");
  chmod(fs::path(m).parent_path().c_str(), 0755);
  chmod(m.c_str(), 0644);
  std::string mine = env.dest(kNobody);
  for (const std::string& d : {"/proc/self/fd/" + std::to_string(n), "/dev/fd/" + std::to_string(n),
                               "/proc/thread-self/fd/" + std::to_string(n), std::string("/proc/self/cwd"),
                               "/proc/" + std::to_string(env.xferd.pid()) + "/fd/" + std::to_string(n)}) {
    Shell s = run(as_nobody(bin("xferctl") + " submit --manifest " + m + " --dest " + d));
    EXPECT_NE(s.status, 0) << d << ": " << s.out;
    // Refused by name (/proc), by the magic link on the way, or because the
    // check's own process holds no such descriptor.
    EXPECT_TRUE(s.out.find("is on /proc") != std::string::npos || s.out.find("magic link") != std::string::npos ||
                s.out.find("does not exist") != std::string::npos)
        << d << ": " << s.out;
  }
  // A symlink of the caller's own to a magic link is no way round it.
  ASSERT_EQ(run(as_nobody("ln -s /proc/self/cwd " + mine + "/via")).status, 0);
  Shell via = run(as_nobody(bin("xferctl") + " submit --manifest " + m + " --dest " + mine + "/via"));
  EXPECT_NE(via.status, 0) << via.out;
  EXPECT_NE(via.out.find("magic link"), std::string::npos) << via.out;
  // The same for a CA file: root's job store through the daemon's descriptor.
  if (store >= 0) {
    Shell ca = run(as_nobody(bin("xferctl") + " submit --manifest " + m + " --dest " + mine + " --ca-file /dev/fd/" +
                             std::to_string(store)));
    EXPECT_NE(ca.status, 0) << ca.out;
    EXPECT_TRUE(ca.out.find("magic link") != std::string::npos || ca.out.find("does not exist") != std::string::npos)
        << ca.out;
  }
  // (Under load root's job may have ended meanwhile; then there is nothing to cancel.)
  Shell cancel = run(bin("xferctl") + " cancel " + rpath.substr(rpath.rfind('/') + 1));
  if (cancel.status != 0) {
    EXPECT_EQ(job_property(rpath, "State"), "done") << cancel.out;
  }
  wait_state(rpath, {"cancelled", "done"});
  for (const auto& e : fs::directory_iterator(shared))
    EXPECT_NE(owner_of(e.path().string()), kNobody) << e.path() << " was written for nobody";
}

// A parameter table nested a million levels deep is refused, with the
// reason, by --check-config, at start, on Reload and by xferctl run; xferd
// keeps running. Before: each crashed (stack overflow) and --check-config
// said OK.
TEST(HostileUser, ADeepTableIsRefusedNotACrash) {
  std::string dir = make_temp_dir("deep-table");
  std::string table = dir + "/table.json";
  // A table that is right in every other way, its predictor nested a
  // million levels deep (what crashed xferd: a recursive copy of it).
  xfer::hla::ParamTable empty;
  empty.history = "test";
  nlohmann::json j = xfer::hla::to_json(empty);
  j["predictor"] = "DEEP";
  std::string text = j.dump();
  text.replace(text.find("\"DEEP\""), 6, "{\"forests\": " + std::string(1000000, '[') + std::string(1000000, ']') + "}");
  std::ofstream(table) << text;
  std::string conf = dir + "/xferd.conf";
  std::ofstream(conf) << "[hla]\ntable = \"" << table << "\"\n";
  Shell c = run(bin("xferd") + " --check-config --config " + conf + " --config-dir " + dir + "/none");
  EXPECT_EQ(c.status, 1) << c.out;
  EXPECT_NE(c.out.find("nested 1000002 levels deep"), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find("configuration OK"), std::string::npos) << c.out;

  Env env("[hla]\ntable = \"" + table + "\"\n");
  EXPECT_TRUE(env.xferd.running());
  Shell r = run("busctl call org.xferd.Xferd1 /org/xferd/Xferd1 org.xferd.Manager1 Reload");
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("nested"), std::string::npos) << r.out;
  EXPECT_EQ(kill(env.xferd.pid(), 0), 0) << "xferd died on Reload";
  EXPECT_NE(env.xferd.log().find("nested 1000002 levels deep"), std::string::npos);

  std::string dest = env.dest();
  Shell x = run(bin("xferctl") + " run --manifest " + env.manifest_file(env.data.manifest(env.nginx.url(false, "/"))) +
                " --dest " + dest + " --sla hla-throughput --hla-table " + table);
  EXPECT_EQ(x.status, 2) << x.out;
  EXPECT_NE(x.out.find("nested"), std::string::npos) << x.out;
  // A deep TOML (dotted keys) is refused the same way.
  std::string deep_toml = "[daemon]\n";
  for (int i = 0; i < 100000; ++i) deep_toml += "a.";
  deep_toml += "b = 1\n";
  std::ofstream(conf) << deep_toml;
  Shell t = run(bin("xferd") + " --check-config --config " + conf + " --config-dir " + dir + "/none");
  EXPECT_EQ(t.status, 1) << t.out;
  EXPECT_NE(t.out.find("nested"), std::string::npos) << t.out;
  fs::remove_all(dir);
}

// What xferd trusts is root's and private: a state directory, a history
// file, a parameter table or a configuration that another user owns or may
// change (or a symlink) is refused with its path and the reason. Before:
// each was used as it was.
TEST(HostileUser, FilesXferdTrustsAreRootsAndPrivate) {
  std::string dir = make_temp_dir("untrusted");
  chmod(dir.c_str(), 0755);
  std::string conf = dir + "/xferd.conf", none = dir + "/none";
  auto check = [&](const std::string& text) {
    std::ofstream(conf) << text;
    return run(bin("xferd") + " --check-config --config " + conf + " --config-dir " + none);
  };
  // A table nobody owns.
  std::string table = dir + "/table.json";
  std::ofstream(table) << "{}";
  chown(table.c_str(), kNobody, kNobody);
  Shell t = check("[hla]\ntable = \"" + table + "\"\n");
  EXPECT_EQ(t.status, 1) << t.out;
  EXPECT_NE(t.out.find("belongs to uid 65534"), std::string::npos) << t.out;
  // A configuration others may write.
  chmod(conf.c_str(), 0666);
  Shell w = run(bin("xferd") + " --check-config --config " + conf + " --config-dir " + none);
  EXPECT_EQ(w.status, 1) << w.out;
  EXPECT_NE(w.out.find("is writable by every user"), std::string::npos) << w.out;
  chmod(conf.c_str(), 0644);
  // A state directory nobody owns: xferd does not start.
  std::string state = dir + "/state";
  ASSERT_EQ(mkdir(state.c_str(), 0700), 0);
  chown(state.c_str(), kNobody, kNobody);
  std::ofstream(conf) << "[daemon]\ninterval_ms = 500\n";
  Shell s = run("timeout 20 " + bin("xferd") + " --config " + conf + " --config-dir " + none + " --state-dir " + state +
                " --bus-address unix:path=" + dir + "/nobus");
  EXPECT_EQ(s.status, 1) << s.out;
  EXPECT_NE(s.out.find("state directory " + state + ": it belongs to uid 65534"), std::string::npos) << s.out;
  EXPECT_FALSE(fs::exists(state + "/xferd.db"));
  // A history that is a symlink: refused, nothing created where it points.
  std::string state2 = dir + "/state2", elsewhere = dir + "/elsewhere.db";
  ASSERT_EQ(mkdir(state2.c_str(), 0700), 0);
  ASSERT_EQ(symlink(elsewhere.c_str(), (state2 + "/history.db").c_str()), 0);
  {
    PrivateBus bus;
    Xferd x("[daemon]\ninterval_ms = 500\n[history]\nurl = \"" + state2 + "/history.db\"\n");
    x.start();
    EXPECT_NE(x.log().find("history " + state2 + "/history.db: it is a symbolic link"), std::string::npos) << x.log();
  }
  EXPECT_FALSE(fs::exists(elsewhere));
  fs::remove_all(dir);
}

// xferctl kernel --restore (the code every xferd start runs) writes only CPU
// knobs and leaves a file that is not a journal as it is. Before: it deleted
// such a file, and "restored" any path a journal named.
TEST(HostileUser, TheKernelJournalTouchesOnlyCpuKnobs) {
  std::string dir = make_temp_dir("kjournal");
  std::string state = dir + "/kernel-state", victim = dir + "/victim";
  std::ofstream(state) << "precious data, not a journal\n";
  Shell a = run(bin("xferctl") + " kernel --restore --state-file " + state);
  EXPECT_NE(a.status, 0) << a.out;
  EXPECT_NE(a.out.find("not a kernel state journal"), std::string::npos) << a.out;
  EXPECT_EQ(file_bytes(state), "precious data, not a journal\n");
  std::ofstream(victim) << "untouched\n";
  std::ofstream(state) << R"({"pid": 1, "entries": [[")" << victim << R"(", "owned"], ["/sys/devices/system/cpu/../../../)"
                       << victim.substr(1) << R"(", "owned"]]})";
  Shell b = run(bin("xferctl") + " kernel --restore --state-file " + state);
  EXPECT_NE(b.out.find("is not a CPU knob"), std::string::npos) << b.out;
  EXPECT_EQ(file_bytes(victim), "untouched\n");
  fs::remove_all(dir);
}

// A caller's files fill the file system only as far as the caller could
// (statvfs f_bavail): then the job pauses with ENOSPC, and root's reserve
// stays free. Before: xferd wrote into ext4's root reserve, as root.
TEST(HostileUser, ACallersBytesCountAgainstTheCallersSpace) {
  std::string dir = make_temp_dir("reserve");
  std::string img = dir + "/fs.img", mnt = dir + "/mnt";
  fs::create_directories(mnt);
  // 48 MiB of ext4 with 50% reserved for root: ~19 MiB free to users, ~43 MiB to root.
  if (run("truncate -s 48M " + img + " && mkfs.ext4 -q -F -m 50 " + img).status != 0 ||
      run("mount -o loop " + img + " " + mnt).status != 0) {
    fs::remove_all(dir);
    GTEST_SKIP() << "no loop-mounted ext4 here (mkfs.ext4 and a loop device are needed)";
  }
  struct Unmount {
    std::string m, d;
    ~Unmount() {
      umount2(m.c_str(), MNT_DETACH);
      fs::remove_all(d);
    }
  } unmount{mnt, dir};
  chown(mnt.c_str(), kNobody, kNobody);
  struct statvfs before;
  ASSERT_EQ(statvfs(mnt.c_str(), &before), 0);
  uint64_t user_free = uint64_t(before.f_bavail) * before.f_frsize, root_free = uint64_t(before.f_bfree) * before.f_frsize;
  Env env;
  uint64_t total = 0;
  for (const auto& f : env.data.files) total += f.size;
  ASSERT_GT(total, user_free) << "the dataset must not fit in what the user may write";
  ASSERT_LT(total, root_free) << "the dataset must fit in what root may write";
  std::string path = submit_as_nobody(env, env.data.manifest(env.nginx.url(false, "/")), mnt);
  EXPECT_EQ(wait_state(path, {"paused", "done", "failed"}, 60), "paused");
  EXPECT_NE(job_property(path, "Error").find("No space left"), std::string::npos) << job_property(path, "Error");
  struct statvfs after;
  ASSERT_EQ(statvfs(mnt.c_str(), &after), 0);
  uint64_t reserve = uint64_t(before.f_bfree - before.f_bavail) * before.f_frsize;
  uint64_t root_left = uint64_t(after.f_bfree) * after.f_frsize;
  // What the caller could not write itself stays free for root (a few blocks
  // of metadata aside).
  EXPECT_GE(root_left + (1u << 20), reserve) << "root's reserve was used: " << root_left << " of " << reserve << " left";
  ASSERT_EQ(run(bin("xferctl") + " cancel " + path.substr(path.rfind('/') + 1)).status, 0);
}

// Whatever length of text a caller sends, what it gets back and what the
// log keeps is bounded. Before: a 10 MB destination or policy name was
// echoed whole into the reply and the log.
TEST(HostileUser, EchoesAreBounded) {
  Env env;
  sd_bus* bus = nullptr;
  ASSERT_GE(sd_bus_open_system(&bus), 0);
  std::string huge(4 << 20, 'x');
  size_t log_before = env.xferd.log().size();
  auto submit = [&](const std::string& dest, const std::string& policy, const std::string& key) {
    sd_bus_message* m = nullptr;
    sd_bus_message_new_method_call(bus, &m, "org.xferd.Xferd1", "/org/xferd/Xferd1", "org.xferd.Manager1", "Submit");
    std::string url = env.nginx.url(false, "/") + env.data.files[0].name;
    sd_bus_message_append(m, "a(sts)ss", 1, url.c_str(), uint64_t(0), "", dest.c_str(), policy.c_str());
    if (key.empty()) sd_bus_message_append(m, "a{sv}", 0);
    else sd_bus_message_append(m, "a{sv}", 1, key.c_str(), "s", "v");
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message* reply = nullptr;
    int r = sd_bus_call(bus, m, 30 * 1000000ull, &e, &reply);
    std::string said = e.message ? e.message : "";
    EXPECT_LT(r, 0);
    sd_bus_error_free(&e);
    sd_bus_message_unref(reply);
    sd_bus_message_unref(m);
    return said;
  };
  std::string d = env.dest();
  for (const std::string& said : {submit("/" + huge, "", ""), submit(d, huge, ""), submit(d, "", huge)}) {
    EXPECT_LT(said.size(), 8192u) << said.substr(0, 300);
    EXPECT_NE(said.find("bytes)"), std::string::npos) << said.substr(0, 300);
  }
  sd_bus_flush_close_unref(bus);
  EXPECT_LT(env.xferd.log().size() - log_before, 64u << 10) << "the log grew by more than 64 KiB";
}

// Bad flags and values exit 2, as the README says, with the reason. Before:
// CLI11's own codes (105 for a value a check refuses, 106 for a wrong type).
TEST(HostileUser, BadFlagsAndValuesExitTwo) {
  for (const std::string& args : {std::string("kernel --cores 0"), std::string("kernel --mode sideways"),
                                  std::string("run --manifest /dev/null --dest /tmp --cc abc"),
                                  std::string("run --no-such-flag"), std::string("list --bogus")}) {
    Shell r = run(bin("xferctl") + " " + args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.out;
    EXPECT_FALSE(r.out.empty()) << args;
  }
  EXPECT_EQ(run(bin("xferctl") + " --help").status, 0);
}

// xferctl run with a PostgreSQL history and no HOME keeps its journal in
// the user's passwd home, never in a shared /tmp/.local another user could
// plant first. Before: /tmp/.local/state/xferd/history.db.
TEST(HostileUser, NoHomeNoJournalInTmp) {
  if (fs::exists("/tmp/.local")) GTEST_SKIP() << "/tmp/.local exists already on this machine";
  std::string dir = make_temp_dir("nohome");
  std::ofstream(dir + "/m") << "http://127.0.0.1:9/x 10\n";
  chmod((dir + "/m").c_str(), 0644);
  Shell r = run(as_nobody("env -u HOME -u XDG_STATE_HOME " + bin("xferctl") + " run --manifest " + dir + "/m --dest " +
                          dir + " --history 'postgresql://u@/db?host=" + dir + "&port=1'"));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/.local/state/xferd/history.db"), std::string::npos) << r.out;  // nobody's passwd home
  EXPECT_FALSE(fs::exists("/tmp/.local")) << r.out;
  fs::remove_all("/tmp/.local");
  fs::remove_all(dir);
}

namespace {

// Two busy loops beside the test (the machine's two cores taken), stopped
// with it whatever happens.
struct CpuHogs {
  std::vector<pid_t> pids;
  CpuHogs() {
    for (int i = 0; i < 2; ++i) {
      pid_t p = fork();
      if (p == 0) {
        alarm(600);  // a hog never outlives a test that was killed
        volatile unsigned long n = 0;
        for (;;) n = n + 1;
      }
      pids.push_back(p);
    }
  }
  ~CpuHogs() {
    for (pid_t p : pids) kill(p, SIGKILL);
    for (pid_t p : pids) waitpid(p, nullptr, 0);
  }
};

// Every name in dest: a final name holds its source whole; nothing else but
// what a job keeps to resume (.part, .part.progress) is there. The count of
// final files. A file already compared is compared again only when its
// inode, size or change time differ (`seen`): the storm looks 600 times.
struct Seen {
  ino_t ino;
  off_t size;
  struct timespec ctime;
};
size_t expect_only_whole_files(const std::string& data, const std::string& dest, const std::string& when,
                               std::map<std::string, Seen>* seen = nullptr) {
  size_t whole = 0;
  for (const auto& e : fs::directory_iterator(dest)) {
    std::string n = e.path().filename().string();
    if (n.ends_with(".part") || n.ends_with(".part.progress")) continue;
    ++whole;
    struct stat st {};
    bool statted = lstat(e.path().c_str(), &st) == 0;
    if (seen && statted) {
      auto it = seen->find(n);
      if (it != seen->end() && it->second.ino == st.st_ino && it->second.size == st.st_size &&
          it->second.ctime.tv_sec == st.st_ctim.tv_sec && it->second.ctime.tv_nsec == st.st_ctim.tv_nsec)
        continue;
    }
    bool same = file_bytes(e.path()) == file_bytes(data + "/" + n);
    EXPECT_TRUE(same) << when << ": " << n << " (" << fs::file_size(e.path())
                      << " bytes) at its final name is not its source";
    if (seen && statted && same) (*seen)[n] = Seen{st.st_ino, st.st_size, st.st_ctim};
  }
  return whole;
}

}  // namespace

// Issue 53, finding 2: Pause, Resume and Cancel racing a job's start, its
// commits and its end never put at a final name anything but the source
// whole, and a job that ends done has every file. Before: a resume that
// found the .part of a file whose commit was still renaming it took the
// file's lock (the torn-down run had let it go) and truncated it at its final
// name (a 0-byte r5), or failed it as written by another transfer. 40 files
// of 200 kB without sizes or sha256 (nothing checks them but the size the
// server gives), under two CPU hogs: 600 Pause / Resume pairs over ten jobs,
// then 40 jobs cancelled at moments spread over their run. (About 100 s
// here: each look after a pause compares only the files new since the last.)
TEST(HostileUser, PauseResumeAndCancelStormsNeverPutAWrongFileAtAFinalName) {
  Env env;
  std::string data = make_temp_dir("storm-data");
  for (int i = 0; i < 40; ++i) {
    std::string body(200 * 1000, '\0');
    for (size_t k = 0; k < body.size(); ++k) body[k] = char((k * 131 + size_t(i) * 7919) >> 3);
    std::ofstream(data + "/r" + std::to_string(i), std::ios::binary) << body;
  }
  chmod(data.c_str(), 0755);
  Nginx storm(data);
  std::string manifest;
  for (int i = 0; i < 40; ++i) manifest += storm.url(false, "/r") + std::to_string(i) + "\n";
  CpuHogs hogs;
  sd_bus* bus = nullptr;
  ASSERT_GE(sd_bus_open_system(&bus), 0);
  auto call = [&](const std::string& path, const char* method) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_call_method(bus, "org.xferd.Xferd1", path.c_str(), "org.xferd.Job1", method, &e, nullptr, "");
    sd_bus_error_free(&e);
  };
  int pairs = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  for (int round = 0; round < 10; ++round) {
    std::string dest = env.dest(kNobody);
    std::string path = submit_as_nobody(env, manifest, dest);
    ASSERT_FALSE(path.empty());
    std::map<std::string, Seen> seen;
    for (int i = 0; i < 60; ++i, ++pairs) {
      call(path, "Pause");
      expect_only_whole_files(data, dest, "paused", &seen);
      call(path, "Resume");
    }
    run(as_nobody(bin("xferctl") + " resume " + path.substr(path.rfind('/') + 1)));  // whichever came last
    ASSERT_EQ(wait_state(path, {"done", "failed", "cancelled"}, 120), "done") << env.xferd.log();
    nlohmann::json s = summary_of(path);
    EXPECT_TRUE(s["failed"].empty()) << "round " << round << ": " << s["failed"].dump();
    EXPECT_EQ(expect_only_whole_files(data, dest, "done"), 40u) << "round " << round;
    expect_no_partials(dest);
  }
  const double storm_s = since();
  for (int round = 0; round < 40; ++round) {
    std::string dest = env.dest(kNobody);
    std::string path = submit_as_nobody(env, manifest, dest);
    std::this_thread::sleep_for(std::chrono::milliseconds(round * 5));
    call(path, "Cancel");
    wait_state(path, {"done", "failed", "cancelled"}, 60);
    expect_only_whole_files(data, dest, "cancelled at " + std::to_string(round * 5) + " ms");
  }
  sd_bus_flush_close_unref(bus);
  std::printf("[ storm ] %d Pause/Resume pairs over 10 jobs (%.0f s) and 40 cancels (%.0f s) under two CPU hogs\n",
              pairs, storm_s, since() - storm_s);
  fs::remove_all(data);
}

// Issue 53, finding 3: a credential passed as a descriptor the caller holds
// the other end of never stops the daemon. A stream socket with SO_RCVLOWAT
// 16384 and one byte queued (before: the loop blocked in read() until the
// caller let go), and a pipe whose writer stays open while another of the
// caller's threads drains it (before: 3 hangs in 1,700 tries): each Submit is
// refused at once, and ListJobs, asked meanwhile, answers within 100 ms.
// (The pipe 20 times here; the reader's unit tests try both kinds at once.)
TEST(HostileUser, ACredentialDescriptorCannotStopTheDaemon) {
  Env env;
  sd_bus* bus = nullptr;
  ASSERT_GE(sd_bus_open_system(&bus), 0);
  std::string dest = env.dest();
  std::string url = env.nginx.url(false, "/") + env.data.files[0].name;
  // Submit with credentials {"bearer_token": <fd>} on a connection of its
  // own, in a thread; ListJobs meanwhile on this one, timed.
  auto submit_then_list = [&](int fd, double* list_ms) {
    std::string said;
    std::thread submitter([&] {
      sd_bus* b = nullptr;
      if (sd_bus_open_system(&b) < 0) return;
      sd_bus_message* m = nullptr;
      sd_bus_message_new_method_call(b, &m, "org.xferd.Xferd1", "/org/xferd/Xferd1", "org.xferd.Manager1", "Submit");
      sd_bus_message_append(m, "a(sts)ss", 1, url.c_str(), uint64_t(0), "", dest.c_str(), "");
      sd_bus_message_open_container(m, 'a', "{sv}");
      sd_bus_message_open_container(m, 'e', "sv");
      sd_bus_message_append(m, "s", "credentials");
      sd_bus_message_open_container(m, 'v', "a{sv}");
      sd_bus_message_append(m, "a{sv}", 1, "bearer_token", "h", fd);
      sd_bus_message_close_container(m);
      sd_bus_message_close_container(m);
      sd_bus_message_close_container(m);
      sd_bus_error e = SD_BUS_ERROR_NULL;
      sd_bus_message* reply = nullptr;
      said = sd_bus_call(b, m, 30 * 1000000ull, &e, &reply) >= 0 ? "accepted" : (e.message ? e.message : "?");
      sd_bus_error_free(&e);
      sd_bus_message_unref(reply);
      sd_bus_message_unref(m);
      sd_bus_flush_close_unref(b);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto t0 = std::chrono::steady_clock::now();
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message* reply = nullptr;
    int r = sd_bus_call_method(bus, "org.xferd.Xferd1", "/org/xferd/Xferd1", "org.xferd.Manager1", "ListJobs", &e,
                               &reply, "");
    *list_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(r, 0) << (e.message ? e.message : "");
    sd_bus_error_free(&e);
    sd_bus_message_unref(reply);
    submitter.join();
    return said;
  };
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  int mark = 16384;
  setsockopt(sv[0], SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof mark);
  ASSERT_EQ(write(sv[1], "t", 1), 1);
  double ms = 0;
  std::string said = submit_then_list(sv[0], &ms);
  EXPECT_NE(said.find("no end ready"), std::string::npos) << said;
  EXPECT_LT(ms, 100) << "ListJobs waited behind the socket";
  close(sv[0]);
  close(sv[1]);
  // A pipe the caller keeps open and drains from another thread while it writes.
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  // The drainer reads through a description of its own, non-blocking (a
  // pipe reopened through /proc is a new open file description): xferd may
  // take the byte between its poll and its read, and the passed end itself
  // stays blocking, as a careless caller's would be.
  int drain = open(("/proc/self/fd/" + std::to_string(p[0])).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(drain, 0);
  ASSERT_EQ(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);  // the write end is the test's alone
  std::atomic<bool> stop{false};
  std::thread drainer([&] {
    char c;
    while (!stop) {
      if (write(p[1], "x", 1) != 1 && errno != EAGAIN) break;
      struct pollfd pf {drain, POLLIN, 0};
      if (poll(&pf, 1, 1) > 0 && read(drain, &c, 1) < 0 && errno != EAGAIN) break;
    }
  });
  double worst = 0;
  for (int i = 0; i < 20; ++i) {
    said = submit_then_list(p[0], &ms);
    worst = std::max(worst, ms);
    EXPECT_NE(said.find("credentials: bearer_token"), std::string::npos) << said;
  }
  stop = true;
  drainer.join();
  close(drain);
  close(p[0]);
  close(p[1]);
  EXPECT_LT(worst, 100) << "ListJobs waited behind the pipe";
  std::printf("[ descriptor ] ListJobs answered within %.1f ms beside 21 hostile credential descriptors\n", worst);
  sd_bus_flush_close_unref(bus);
}

