// Metrics for Prometheus (its text exposition format, version 0.0.4), named
// by its conventions: the xferd_ prefix, base units (bytes, seconds,
// joules, hertz), counters ending in _total, histograms for durations and
// RTT. Labels are policy, class, state or outcome at most: never a job id,
// a URL or a user (cardinality, and other users' business). Per-job energy
// is not here either: fine-grained energy is a side channel (CVE-2020-8694),
// and the endpoint has no authentication.
//
//   MetricSet    families in the order they were declared, each a type, a
//                help line and its series by label set; counters and
//                histograms only ever grow (the Service keeps one set for
//                them), gauges are built at each scrape.
//   render()     the text an endpoint serves and the textfile holds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace xferd {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class MetricSet {
 public:
  enum class Type { Counter, Gauge, Histogram };
  // Declares a family (again: nothing changes). Histograms take their
  // buckets' upper bounds, ascending (+Inf is added).
  void declare(const std::string& name, Type type, const std::string& help, std::vector<double> buckets = {});
  // A counter grows by v (v < 0 is ignored: a counter never goes back).
  void add(const std::string& name, const MetricLabels& labels, double v);
  // A gauge's value, or a counter's that is kept elsewhere and read now.
  void set(const std::string& name, const MetricLabels& labels, double v);
  void observe(const std::string& name, const MetricLabels& labels, double v);  // a histogram
  // One series' value (0 when absent), for tests and for the top view.
  double value(const std::string& name, const MetricLabels& labels = {}) const;
  // Appends the families in declaration order; a family with no series
  // still says what it is (HELP and TYPE), so that a scraper learns it.
  void render(std::string& out) const;

 private:
  struct Histogram {
    std::vector<uint64_t> counts;  // per bucket, not cumulative
    double sum = 0;
    uint64_t count = 0;
  };
  struct Family {
    Type type = Type::Gauge;
    std::string help;
    std::vector<double> buckets;
    std::map<std::string, double> values;         // by rendered label set
    std::map<std::string, Histogram> histograms;  // by rendered label set
  };
  Family* find(const std::string& name, Type type);
  std::vector<std::string> order_;
  std::map<std::string, Family> families_;
};

// {a="x",b="y"} with the values escaped as the format wants (\\, \", \n); ""
// for no labels. Label names are the code's own.
std::string render_labels(const MetricLabels& labels);
// A sample value as the format writes it: integers without a fraction,
// +Inf, -Inf, NaN.
std::string render_value(double v);

// The Content-Type of what render() writes.
constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace xferd
