// xferd's configuration: the shipped file, errors with file and line, drop-ins.
#include "config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace {

struct TempDir {
  TempDir() {
    char t[] = "/tmp/xferd-config-XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::string p = path + "/" + name;
    fs::create_directories(fs::path(p).parent_path());
    std::ofstream(p) << text;
    return p;
  }
  std::string path;
};

std::string error_of(const std::string& main, const std::string& dir) {
  try {
    xferd::load_config(main, dir);
  } catch (const xferd::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Config, ShippedFileIsTheBuiltInDefaults) {
  xferd::Config shipped = xferd::load_config(XFER_SOURCE_DIR "/systemd/xferd.conf", "/nonexistent");
  xferd::Config builtin = xferd::builtin_config();
  EXPECT_EQ(shipped.values, builtin.values);  // every job option the sections set
  EXPECT_EQ(shipped.state_dir, builtin.state_dir);
  EXPECT_EQ(shipped.keep_finished_days, builtin.keep_finished_days);
  EXPECT_EQ(shipped.default_policy, builtin.default_policy);
  EXPECT_EQ(shipped.default_policy_unprivileged, builtin.default_policy_unprivileged);
  EXPECT_EQ(shipped.max_jobs_per_user, builtin.max_jobs_per_user);
  EXPECT_EQ(shipped.max_entries_per_job, builtin.max_entries_per_job);
  EXPECT_EQ(shipped.max_entries_per_user, builtin.max_entries_per_user);
  EXPECT_EQ(shipped.max_running_jobs, builtin.max_running_jobs);
  EXPECT_EQ(shipped.kernel_group, builtin.kernel_group);
  ASSERT_EQ(shipped.policies.size(), builtin.policies.size());
  for (const auto& [name, b] : builtin.policies) {
    ASSERT_TRUE(shipped.policies.count(name)) << name;
    const xferd::Policy& s = shipped.policies.at(name);
    EXPECT_EQ(s.algorithm, b.algorithm) << name;
    EXPECT_EQ(s.kernel, b.kernel) << name;
    EXPECT_EQ(s.values, b.values) << name;
  }
  ASSERT_EQ(shipped.files.size(), 1u);
  // The link is not configured there: the arbiter measures it.
  EXPECT_FALSE(shipped.configured("bandwidth_mbps"));
  EXPECT_TRUE(shipped.configured("interval_ms"));
}

// A value a file sets is told from the table's default (the link's capacity
// is the arbiter's only when an admin wrote it).
TEST(Config, AValueAFileSetsIsToldFromADefault) {
  TempDir d;
  std::string main = d.write("xferd.conf", "[network]\nbandwidth_mbps = 1000\n");
  xferd::Config c = xferd::load_config(main, d.path + "/none");
  EXPECT_TRUE(c.configured("bandwidth_mbps"));
  EXPECT_FALSE(c.configured("http"));
  EXPECT_FALSE(xferd::builtin_config().configured("bandwidth_mbps"));
}

TEST(Config, EveryKeyOfTheShippedFileHasAComment) {
  std::ifstream in(XFER_SOURCE_DIR "/systemd/xferd.conf");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  // Every global key: set in its section, a comment right above it; a key
  // whose absence means something of its own (the link: measured; no
  // schedule) is shown commented out, "#key = example".
  for (const std::string& sk : xferd::config_keys()) {
    std::string section = sk.substr(0, sk.find('.')), key = sk.substr(sk.find('.') + 1);
    std::string current;
    bool found = false;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].rfind("[", 0) == 0) current = lines[i].substr(1, lines[i].find(']') - 1);
      if (current == section && (lines[i].rfind(key + " = ", 0) == 0 || lines[i].rfind("#" + key + " = ", 0) == 0)) {
        found = true;
        EXPECT_TRUE(i > 0 && lines[i - 1].rfind("#", 0) == 0) << sk << " has no comment above it";
      }
    }
    EXPECT_TRUE(found) << sk << " is not in the shipped xferd.conf";
  }
  // Every policy key: explained in the block above the policies.
  for (const std::string& k : xferd::policy_keys_known()) {
    bool documented = false;
    for (const auto& l : lines) documented |= l.rfind("#   " + k + " ", 0) == 0 || l.rfind("#   " + k + ",", 0) == 0;
    EXPECT_TRUE(documented) << "policy key " << k << " is not documented in the shipped xferd.conf";
  }
}

TEST(Config, NoFileMeansBuiltInDefaults) {
  xferd::Config c = xferd::load_config("/nonexistent/xferd.conf", "/nonexistent/xferd.conf.d");
  EXPECT_TRUE(c.files.empty());
  EXPECT_EQ(c.policies.size(), 9u);
  EXPECT_EQ(c.policies.at("hla-energy").algorithm, "hla-energy");
  EXPECT_TRUE(c.policies.at("min-energy").kernel);
  EXPECT_FALSE(c.policies.at("app-min-energy").kernel);
}

TEST(Config, ErrorsNameFileLineAndReason) {
  TempDir d;
  std::string f = d.write("a.conf", "[limits]\nmax_jobs_per_user = 4\nmax_channels = \"many\"\n");
  EXPECT_EQ(error_of(f, "/nonexistent"), f + ":3: [limits] max_channels takes an integer, not \"many\"");
  f = d.write("b.conf", "[daemon]\n\ninterval_msec = 10\n");
  EXPECT_EQ(error_of(f, "/nonexistent").rfind(f + ":3: unknown key 'interval_msec' in [daemon]", 0), 0u) << error_of(f, "/x");
  f = d.write("c.conf", "[daemon\ninterval_ms = 10\n");
  EXPECT_EQ(error_of(f, "/nonexistent").rfind(f + ":1:", 0), 0u) << error_of(f, "/x");
  f = d.write("d.conf", "[limits]\nmax_channels = 0\n");
  EXPECT_EQ(error_of(f, "/nonexistent"), f + ":2: [limits] max_channels must be between 1 and 4096, not 0");
  f = d.write("e.conf", "[policy.fast]\nalgorithm = \"warp\"\n");
  EXPECT_NE(error_of(f, "/nonexistent").find(f + ":2: [policy.fast] algorithm: 'warp' is not one of"), std::string::npos);
  f = d.write("f.conf", "[policy.t]\nalgorithm = \"throughput-target\"\n");
  EXPECT_EQ(error_of(f, "/nonexistent"), f + ":1: policy t: throughput-target needs target_mbps or target_pct");
  f = d.write("g.conf", "[kernel]\nmode = \"sometimes\"\n");
  EXPECT_EQ(error_of(f, "/nonexistent"), f + ":2: [kernel] kernel_mode: 'sometimes' is not one of auto, hotplug, affinity, off");
  // The defaults must name policies that exist once a file replaces the set.
  f = d.write("h.conf", "[policy.only]\nalgorithm = \"min-energy\"\n");
  EXPECT_NE(error_of(f, "/nonexistent").find("default_policy 'min-energy' is not a defined policy"), std::string::npos);
  f = d.write("i.conf", "[daemon]\ndefault_policy_unprivileged = \"min-energy\"\n");
  EXPECT_NE(error_of(f, "/nonexistent").find("changes the kernel layer"), std::string::npos);
}

TEST(Config, DropInsOverrideInNameOrder) {
  TempDir d;
  std::string main = d.write("xferd.conf", "[limits]\nmax_jobs_per_user = 4\n");
  d.write("conf.d/20-late.conf", "[limits]\nmax_jobs_per_user = 9\n");
  d.write("conf.d/10-early.conf",
          "[limits]\nmax_jobs_per_user = 7\nmax_entries_per_job = 50\n"
          "[policy.lab]\nalgorithm = \"max-throughput\"\nusers = [\"alice\", 1001]\n"
          "[daemon]\ndefault_policy = \"lab\"\ndefault_policy_unprivileged = \"lab\"\n");
  d.write("conf.d/ignored.txt", "garbage [[[");
  xferd::Config c = xferd::load_config(main, d.path + "/conf.d");
  EXPECT_EQ(c.max_jobs_per_user, 9);
  EXPECT_EQ(c.max_entries_per_job, 50);
  ASSERT_EQ(c.policies.size(), 1u);  // a file's policies replace the built-in set
  EXPECT_EQ(c.policies.at("lab").users, (std::vector<std::string>{"alice", "1001"}));
  EXPECT_EQ(c.files.size(), 3u);
}
