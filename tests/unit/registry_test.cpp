// The tuner registry (libxfer/tune/registry.cpp): which options go with
// which policy is data there, and the checks, the config and the README
// agree with it.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "xfer/options.h"
#include "xfer/tuner.h"

namespace {

std::string readme() {
  std::ifstream in(XFER_SOURCE_DIR "/README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The text of a README section, from its "## " heading to the next.
std::string section(const std::string& text, const std::string& heading) {
  size_t b = text.find("\n## " + heading + "\n");
  if (b == std::string::npos) return "";
  size_t e = text.find("\n## ", b + 1);
  return text.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

}  // namespace

TEST(Registry, EveryOwnOptionIsARowOfTheOptionsTable) {
  std::set<std::string> names;
  for (const xfer::TunerEntry& e : xfer::tuner_registry()) {
    EXPECT_TRUE(names.insert(e.name).second) << "twice: " << e.name;
    EXPECT_EQ(xfer::find_tuner(e.name), &e);
    for (const std::string& k : e.takes) EXPECT_NE(xfer::find_option(k), nullptr) << e.name << " takes " << k;
    for (const auto& group : e.needs)
      for (const std::string& k : group)
        EXPECT_NE(std::find(e.takes.begin(), e.takes.end(), k), e.takes.end()) << e.name << " needs " << k
                                                                               << " without taking it";
  }
  EXPECT_EQ(xfer::find_tuner("warp"), nullptr);
}

TEST(Registry, ThePolicyRulesAreReadFromIt) {
  // An option of one policy's own, given to another: refused in words made
  // from the registry.
  EXPECT_EQ(xfer::check_layer({{"search_step", 4}}, xfer::kPolicy, "min-energy"),
            "search_step goes with the energy-efficient algorithm, not min-energy");
  EXPECT_EQ(xfer::check_layer({{"search_step", 4}}, xfer::kPolicy, "energy-efficient"), "");
  EXPECT_EQ(xfer::check_layer({{"search_levels", {1}}}, xfer::kRun, "max-throughput"),
            "search_levels goes with the static and energy-efficient algorithms, not max-throughput");
  EXPECT_EQ(xfer::check_layer({{"sweep", "1:1:1"}}, xfer::kRun, "hla-energy"),
            "sweep / sweep_hold go with the sweep algorithm, not hla-energy");
  // What a policy needs, over the merged layers.
  EXPECT_EQ(xfer::tuner_needs_problem("throughput-target", {{"label", "x"}}), "needs target_mbps or target_pct");
  EXPECT_EQ(xfer::tuner_needs_problem("throughput-target", {{"target_pct", 50}}), "");
  EXPECT_EQ(xfer::tuner_needs_problem("sweep", nlohmann::json::object()), "needs sweep");
  xfer::OptionLayers l;
  l.job_scope = xfer::kRun;
  try {
    xfer::setup_job("sweep", l);
    ADD_FAILURE() << "a sweep without points was set up";
  } catch (const xfer::OptionError& e) {
    EXPECT_STREQ(e.what(), "the sweep algorithm needs sweep");
  }
  l.job = {{"sweep", "2:1:1,4:1:1"}};
  EXPECT_EQ(xfer::setup_job("sweep", l).tuner.sweep_points.size(), 2u);
  // Options no entry takes go with every policy.
  EXPECT_EQ(xfer::check_layer({{"max_channels", 8}, {"label", "x"}}, xfer::kJob, "hla-energy"), "");
}

// The README's policy table and Submit's options are the registry's and the
// options table's (as daemon_test checks the D-Bus XML against the daemon).
TEST(Registry, TheReadmeListsEveryPolicyAndEverySubmitOption) {
  std::string text = readme();
  ASSERT_FALSE(text.empty()) << "README.md not found under " XFER_SOURCE_DIR;
  std::string policies = section(text, "SLA policies");
  ASSERT_FALSE(policies.empty()) << "README.md has no '## SLA policies' section";
  std::set<std::string> in_table;
  std::regex row(R"(\n\| `([a-z][a-z-]*)` \|)");
  for (std::sregex_iterator it(policies.begin(), policies.end(), row), end; it != end; ++it) in_table.insert((*it)[1]);
  std::set<std::string> registry;
  for (const xfer::TunerEntry& e : xfer::tuner_registry()) registry.insert(e.name);
  EXPECT_EQ(in_table, registry) << "the README's policy table differs from the tuner registry";

  // "Options: `a`, `b`, ..." in the daemon's section: every kJob option, no other.
  std::string daemon = section(text, "The daemon");
  size_t at = daemon.find("Options: ");
  ASSERT_NE(at, std::string::npos) << "the daemon section lists no Submit options";
  std::string list = daemon.substr(at, daemon.find('.', at) - at);
  std::set<std::string> listed, table;
  std::regex name("`([a-z_]+)`");
  for (std::sregex_iterator it(list.begin(), list.end(), name), end; it != end; ++it) listed.insert((*it)[1]);
  for (const xfer::OptionSpec& o : xfer::option_table())
    if (o.scopes & xfer::kJob) table.insert(o.name);
  EXPECT_EQ(listed, table) << "the README's Submit options differ from the options table's kJob rows";
}

TEST(TunerRegistry, KnowsItsPoliciesAndRejectsOthers) {
  EXPECT_EQ(xfer::make_tuner("min-energy", {})->name(), "min-energy");
  auto st = xfer::make_tuner("static", {xfer::ChunkParams{4, 2, 8}});
  xfer::StartFacts info;
  info.chunks.resize(2);
  EXPECT_EQ(st->init(info).chunks.at(1), (xfer::ChunkParams{4, 2, 8}));
  try {
    xfer::make_tuner("warp-speed", {});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("known: static, min-energy, max-throughput"), std::string::npos);
  }
}
