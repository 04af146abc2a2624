// What the daemon's integration tests share: xferd with nginx and a dataset
// on a private bus (Env), and small helpers around busctl and job objects.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "daemon.h"
#include "fixture.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace xtest {

inline constexpr uid_t kNobody = 65534;

// Tests never take CPUs offline (kernel_tests do, one at a time): the kernel
// layer works by affinity on xferd's own threads, with its journal here.
inline std::string config(const std::string& extra = "") {
  return "[daemon]\ninterval_ms = 500\n"
         "[kernel]\nmode = \"affinity\"\nstate_file = \"@STATE@\"\n" +
         extra;
}

struct Env {
  explicit Env(const std::string& extra = "", const std::string& rate = "4m", std::vector<TlsSite> tls = {})
      : data(dataset(12, 2, 1, 0.1)), nginx(data.dir, rate, std::move(tls)), xferd(with_state(extra)) {
    xferd.start();
  }
  std::string with_state(const std::string& extra) {
    std::string c = config(extra);
    kernel_state = make_temp_dir("kstate") + "/kernel-state";
    return std::regex_replace(c, std::regex("@STATE@"), kernel_state);
  }
  std::string dest(uid_t owner = 0) {
    std::string d = make_temp_dir("dest");
    if (owner) chown(d.c_str(), owner, owner);
    return d;
  }
  std::string manifest_file(const std::string& text) {
    std::string f = make_temp_dir("manifest") + "/m.txt";
    std::ofstream(f) << text;
    return f;
  }
  std::string kernel_state;
  PrivateBus bus;
  Dataset data;
  Nginx nginx;
  Xferd xferd;
};

// A manifest of Env's video over /slow/ (4 MB/s per connection): a job that runs for seconds.
inline std::string slow_video(Env& env) {
  for (const auto& f : env.data.files)
    if (f.name.find("video") != std::string::npos) return env.nginx.url(false, "/slow/") + f.name + "\n";
  return "";
}

inline std::string shq(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// busctl's Submit: entries as (url, size, sha256).
inline std::string busctl_submit(const Dataset& d, const std::string& base, const std::string& dest, const std::string& policy) {
  std::string cmd = "busctl call org.xferd.Xferd1 /org/xferd/Xferd1 org.xferd.Manager1 Submit 'a(sts)ssa{sv}' " +
                    std::to_string(d.files.size());
  for (const auto& f : d.files) cmd += " " + shq(base + f.name) + " " + std::to_string(f.size) + " " + f.sha256;
  return cmd + " " + shq(dest) + " " + shq(policy) + " 0";
}

inline std::string object_path(const std::string& busctl_out) {
  std::smatch m;
  if (std::regex_search(busctl_out, m, std::regex("[\"'](/org/xferd/Xferd1/job/[0-9]+)[\"']"))) return m[1];
  return "";
}

inline std::string wait_state(const std::string& path, const std::vector<std::string>& states, double seconds = 60) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(long(seconds * 1000));
  std::string s;
  while (std::chrono::steady_clock::now() < until) {
    s = job_property(path, "State");
    for (const auto& want : states)
      if (s == want) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return s;
}

inline uint64_t bytes_done(const std::string& path) { return std::stoull("0" + job_property(path, "BytesDone")); }

inline void wait_bytes(const std::string& path, uint64_t at_least, double seconds = 60) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(long(seconds * 1000));
  while (std::chrono::steady_clock::now() < until && bytes_done(path) < at_least)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

// A finished job's summary (its Summary property, parsed); {} when there is none.
inline nlohmann::json summary_of(const std::string& path) {
  Shell r = run("busctl --json=short get-property org.xferd.Xferd1 " + path + " org.xferd.Job1 Summary");
  nlohmann::json v = nlohmann::json::parse(r.out, nullptr, false);
  if (!v.is_object() || !v["data"].is_string()) return nlohmann::json::object();
  return nlohmann::json::parse(v["data"].get<std::string>(), nullptr, false);
}

// The job object path in a client's output ("" when there is none).
inline std::string path_in(const std::string& out) {
  std::smatch mt;
  std::regex_search(out, mt, std::regex("/org/xferd/Xferd1/job/[0-9]+"));
  return mt.empty() ? "" : mt[0].str();
}

// xferctl submit as nobody of a manifest's text into dest; the job's path.
inline std::string submit_as_nobody(Env& env, const std::string& manifest, const std::string& dest,
                                    const std::string& extra = "") {
  std::string m = env.manifest_file(manifest);
  chmod(std::string(m, 0, m.rfind('/')).c_str(), 0755);
  chmod(m.c_str(), 0644);
  Shell s = run(as_nobody(bin("xferctl") + " submit --manifest " + m + " --dest " + dest + " " + extra));
  EXPECT_EQ(s.status, 0) << s.out;
  return path_in(s.out);
}

// nobody plants a sparse file of `bytes` at dest/name and submits a job for
// it whose sha256 does not match: the job's one file is checked (read whole,
// on a thread) and fails. The job's path.
inline std::string submit_sparse_mismatch(Env& env, const std::string& dest, const std::string& name, uint64_t bytes) {
  EXPECT_EQ(run(as_nobody("truncate -s " + std::to_string(bytes) + " " + dest + "/" + name)).status, 0);
  return submit_as_nobody(
      env, env.nginx.url(false, "/" + name) + " " + std::to_string(bytes) + " sha256:" + std::string(64, 'a') + "\n", dest);
}

inline uid_t owner_of(const std::string& p) {
  struct stat st {};
  stat(p.c_str(), &st);
  return st.st_uid;
}

}  // namespace xtest
