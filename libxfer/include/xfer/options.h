// The options of a job, in one table (in the way aria2's
// OptionHandlerFactory is): each with its name, type, range or choices,
// default, the scopes it may be set in and whether it may change while the
// job runs. xferctl's flags, xferd.conf's keys and the D-Bus checks of
// Submit's options are made from it, so a value is refused with the same
// words wherever it comes from; setup_job() is the one place that turns a
// set of values into the Job's, the tuner's and the kernel layer's options,
// for xferctl run and for xferd.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "xfer/engine.h"
#include "xfer/arbiter.h"
#include "xfer/kernel.h"
#include "xfer/tuner.h"

namespace xfer {

enum class OptionType { Integer, Number, Text, Choice, IntegerList, Path };

// Where an option may be set.
enum OptionScope : unsigned {
  kGlobal = 1,  // xferd.conf's sections, for every job
  kPolicy = 2,  // a [policy.NAME]
  kJob = 4,     // Submit's a{sv}, xferctl submit's flags
  kRun = 8,     // xferctl run's flags
};

struct OptionSpec {
  std::string name;  // the D-Bus key and the policy key
  OptionType type;
  double lo = 0, hi = 0;             // Integer, Number, IntegerList: the range, inclusive
  std::vector<std::string> choices;  // Choice
  nlohmann::json def;                // the default; null: unset unless a front end gives one
  unsigned scopes = 0;
  bool live = false;  // may change while the job runs
  std::string help;
  std::string global_key;  // "section.key" in xferd.conf (kGlobal)
  std::string flag;        // xferctl's flag when not --NAME with '-' for '_'
  size_t max_bytes = 4096;  // Text, Path

  std::string flag_name() const;
};

const std::vector<OptionSpec>& option_table();
const OptionSpec* find_option(const std::string& name);

// "" or why v is not a value of o, in the words every front end uses
// ("target_pct must be between 1 and 100, not 150").
std::string check_option(const OptionSpec& o, const nlohmann::json& v);
// A value from text (a flag's argument): typed as the table says; *why set
// when it is not a value of o.
nlohmann::json option_from_text(const OptionSpec& o, const std::string& text, std::string* why);

class OptionError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// name -> value (JSON object), one layer of settings.
using OptionValues = nlohmann::json;

// The layers of one job's settings, each checked against its scope.
struct OptionLayers {
  OptionValues defaults = OptionValues::object();  // the front end's, for options the table leaves unset (paths)
  OptionValues global = OptionValues::object();  // kGlobal: the daemon's config
  OptionValues policy = OptionValues::object();  // kPolicy
  OptionValues job = OptionValues::object();     // kJob (Submit) or kRun (xferctl run): job_scope
  OptionScope job_scope = kJob;
  // The global layer holds its defaults too: whether a file set the link rate.
  bool global_bandwidth_configured = false;
};

// A job's settings resolved from its layers: what its engine, its tuner, the
// kernel layer and the arbiter are given.
struct ResolvedOptions {
  OptionValues values;  // merged: defaults < global < policy < job
  EngineOptions engine;
  TunerOptions tuner;
  bool kernel = false;  // the tuner may turn the kernel layer (kernel_mode is not "off")
  KernelLayer::Config kernel_config;
  // Many jobs on one machine: how the arbiter sees the job.
  JobClass cls = JobClass::Normal;
  double weight = 1;
  bool queue_unfit = false;  // a floor that does not fit waits (else Submit refuses it)
};

// Checks every value against the table and its layer's scope, and what
// holds across options for a job of the algorithm; merges the layers (a
// policy's or job's target replaces the one below it; kernel ranges of a
// policy lie within the global ones). Throws OptionError.
ResolvedOptions setup_job(const std::string& algorithm, const OptionLayers& layers);
// The checks of one layer alone (a policy in the config, a Submit's
// options): "" or the first problem.
std::string check_layer(const OptionValues& v, OptionScope scope, const std::string& algorithm = "");

// kernel_mode as a CoreControl mode: hotplug where cpuN/online is writable ("auto"),
// else affinity (only this process's threads); logs which "auto" chose.
CoreControl::Mode core_mode(const std::string& kernel_mode);

}  // namespace xfer
