// The option table: one checker for every front end, the layers of a job's
// settings merged in one place, and what holds across options.
#include "xfer/options.h"

#include <gtest/gtest.h>

#include <set>

using xfer::OptionValues;

namespace {

std::string setup_error(const std::string& algorithm, const xfer::OptionLayers& l) {
  try {
    xfer::setup_job(algorithm, l);
  } catch (const xfer::OptionError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Options, EveryOptionHasAScopeHelpAndAUniqueFlag) {
  std::set<std::string> names, flags, keys;
  for (const xfer::OptionSpec& o : xfer::option_table()) {
    EXPECT_TRUE(names.insert(o.name).second) << o.name;
    EXPECT_TRUE(flags.insert(o.flag_name()).second) << o.flag_name();
    EXPECT_NE(o.scopes, 0u) << o.name;
    EXPECT_FALSE(o.help.empty()) << o.name;
    EXPECT_EQ(o.global_key.empty(), !(o.scopes & xfer::kGlobal)) << o.name << ": a global option needs its section.key";
    if (!o.global_key.empty()) {
      EXPECT_TRUE(keys.insert(o.global_key).second) << o.global_key;
    }
    if (!o.def.is_null()) {
      EXPECT_EQ(xfer::check_option(o, o.def), "") << o.name << ": its default is not one of its values";
    }
  }
  EXPECT_EQ(xfer::find_option("target_pct")->flag_name(), "--target-pct");
  EXPECT_EQ(xfer::find_option("power_model")->flag_name(), "--model");
}

TEST(Options, OneCheckerOneWording) {
  const xfer::OptionSpec& pct = *xfer::find_option("target_pct");
  EXPECT_EQ(xfer::check_option(pct, 150), "target_pct must be between 1 and 100, not 150");
  EXPECT_EQ(xfer::check_option(pct, 0), "target_pct must be between 1 and 100, not 0");
  EXPECT_EQ(xfer::check_option(pct, 70), "");
  EXPECT_EQ(xfer::check_option(pct, "70"), "target_pct takes a number, not \"70\"");
  std::string why;
  EXPECT_TRUE(xfer::option_from_text(pct, "150", &why).is_null());
  EXPECT_EQ(why, "target_pct must be between 1 and 100, not 150");  // the flag's words are the table's
  EXPECT_TRUE(xfer::option_from_text(pct, "nan", &why).is_null());
  EXPECT_EQ(why, "target_pct must be a finite number, not nan");
  const xfer::OptionSpec& cc = *xfer::find_option("cc");
  EXPECT_EQ(xfer::check_option(cc, 2.5), "cc takes an integer, not 2.5");
  EXPECT_EQ(xfer::option_from_text(cc, "8", &why), 8);
  EXPECT_EQ(why, "");
  const xfer::OptionSpec& http = *xfer::find_option("http");
  EXPECT_EQ(xfer::check_option(http, "h3"), "http: 'h3' is not one of auto, 1.1, h2c");
  const xfer::OptionSpec& levels = *xfer::find_option("search_levels");
  EXPECT_EQ(xfer::option_from_text(levels, "1,5,9", &why), (OptionValues{1, 5, 9}));
  xfer::option_from_text(levels, "1,0", &why);
  EXPECT_EQ(why, "search_levels must be between 1 and 4096, not 0");
  const xfer::OptionSpec& label = *xfer::find_option("label");
  EXPECT_EQ(xfer::check_option(label, std::string(201, 'x')), "label: at most 200 bytes");
}

TEST(Options, ScopesAndCombinationsAreCheckedOnce) {
  EXPECT_EQ(xfer::check_layer({{"cc", 4}}, xfer::kJob),
            "cc cannot be set in a job's options (there: max_channels, unvalidated_resume, ca_file, label, class, "
            "target_mbps, target_pct, energy_budget_j_per_gb)");
  EXPECT_NE(xfer::check_layer({{"warp", 9}}, xfer::kPolicy).find("unknown option 'warp'"), std::string::npos);
  EXPECT_EQ(xfer::check_layer({{"target_mbps", 100}, {"target_pct", 50}}, xfer::kRun), "give target_mbps or target_pct, not both");
  EXPECT_EQ(xfer::check_layer({{"target_pct", 50}}, xfer::kJob, "min-energy"),
            "target_mbps / target_pct go with the throughput-target and hla-throughput algorithms, not min-energy");
  EXPECT_EQ(xfer::check_layer({{"target_pct", 50}}, xfer::kJob, "hla-throughput"), "");
  EXPECT_EQ(xfer::check_layer({{"energy_budget_j_per_gb", 90}}, xfer::kJob, "hla-energy"), "");
  EXPECT_EQ(xfer::check_layer({{"energy_budget_j_per_gb", 90}}, xfer::kRun, "min-energy"),
            "energy_budget_j_per_gb goes with the hla-energy algorithm, not min-energy");
  EXPECT_EQ(xfer::check_layer({{"cores", 1}}, xfer::kRun, "min-energy"),
            "cores fixes the params; cc, p, pp, cores and freq_khz go with the static algorithm, not min-energy");
  EXPECT_EQ(xfer::check_layer({{"min_cores", 4}, {"max_cores", 2}}, xfer::kPolicy), "min_cores is above max_cores");
  xfer::OptionLayers l;
  EXPECT_EQ(setup_error("throughput-target", l), "the throughput-target algorithm needs target_mbps or target_pct");
}

TEST(Options, LayersMergeAsTheDaemonDocumentsThem) {
  xfer::OptionLayers l;
  l.defaults = {{"kernel_state", "/run/x/k.json"}};
  l.global = {{"max_channels", 16}, {"min_cores", 2}, {"max_freq_khz", 2000000}, {"interval_ms", 1000}};
  l.policy = {{"target_pct", 70}, {"max_channels", 24}, {"min_cores", 1}, {"max_freq_khz", 2500000}};
  l.job = {{"target_mbps", 300}, {"max_channels", 64}};
  xfer::ResolvedOptions s = xfer::setup_job("throughput-target", l);
  EXPECT_DOUBLE_EQ(s.tuner.target_mbps, 300);  // the job's target replaces the policy's, whichever kind
  EXPECT_DOUBLE_EQ(s.tuner.target_pct, 0);
  EXPECT_EQ(s.engine.max_channels, 24);        // the policy's replaces the global; the job's only lowers it
  EXPECT_EQ(s.kernel_config.min_cores, 2);     // a policy's kernel range lies within the global one
  EXPECT_EQ(s.kernel_config.max_freq_khz, 2000000);
  EXPECT_EQ(s.kernel_config.state_file, "/run/x/k.json");
  EXPECT_EQ(s.engine.interval_ms, 1000);
  EXPECT_EQ(s.engine.http, "auto");  // the table's default
  EXPECT_FALSE(s.tuner.fixed);
  l.job = {{"max_channels", 8}};
  EXPECT_EQ(xfer::setup_job("throughput-target", l).engine.max_channels, 8);

  xfer::OptionLayers run;
  run.job_scope = xfer::kRun;
  run.job = {{"cc", 4}, {"pp", 8}, {"kernel_mode", "off"}};
  xfer::ResolvedOptions st = xfer::setup_job("static", run);
  ASSERT_TRUE(st.tuner.fixed);
  EXPECT_EQ(*st.tuner.fixed, (xfer::ChunkParams{4, 1, 8}));
  EXPECT_FALSE(st.kernel);
  EXPECT_FALSE(st.tuner.kernel);
}

// A job's class only lowers its policy's (issue 39: a job may ask for a lower
// class, never a higher one than its policy allows); weight is the policy's.
TEST(Options, AJobMayOnlyLowerItsClass) {
  xfer::OptionLayers l;
  l.policy = {{"class", "high"}, {"weight", 2.5}};
  l.job = {{"class", "background"}};
  xfer::ResolvedOptions s = xfer::setup_job("min-energy", l);
  EXPECT_EQ(s.cls, xfer::JobClass::Background);
  EXPECT_DOUBLE_EQ(s.weight, 2.5);
  l.job = {{"class", "foreground"}};
  try {
    xfer::setup_job("min-energy", l);
    FAIL() << "a higher class than the policy's was accepted";
  } catch (const xfer::OptionError& e) {
    EXPECT_STREQ(e.what(), "class foreground is above the policy's (high); a job may only lower its class");
  }
  l.job = xfer::OptionValues::object();
  EXPECT_EQ(xfer::setup_job("min-energy", l).cls, xfer::JobClass::High);
  EXPECT_EQ(xfer::setup_job("min-energy", xfer::OptionLayers{}).cls, xfer::JobClass::Normal);
  EXPECT_NE(xfer::check_layer({{"weight", 2}}, xfer::kJob), "");  // a caller cannot raise its own weight
}
