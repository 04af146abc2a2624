#include "metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace xferd {

namespace {

std::string escaped(const std::string& v, bool quote) {
  std::string out;
  out.reserve(v.size());
  for (char ch : v) {
    if (ch == '\\') out += "\\\\";
    else if (ch == '\n') out += "\\n";
    else if (ch == '"' && quote) out += "\\\"";
    else out += ch;
  }
  return out;
}

const char* type_name(MetricSet::Type t) {
  switch (t) {
    case MetricSet::Type::Counter: return "counter";
    case MetricSet::Type::Gauge: return "gauge";
    case MetricSet::Type::Histogram: return "histogram";
  }
  return "untyped";
}

// A label set with one more label (a histogram's le) inside its braces.
std::string with_label(const std::string& rendered, const std::string& name, const std::string& value) {
  std::string extra = name + "=\"" + value + "\"";
  if (rendered.empty()) return "{" + extra + "}";
  return rendered.substr(0, rendered.size() - 1) + "," + extra + "}";
}

}  // namespace

std::string render_labels(const MetricLabels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i)
    out += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, escaped(labels[i].second, true));
  return out + "}";
}

std::string render_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 9e15) return fmt::format("{}", int64_t(v));
  return fmt::format("{}", v);  // shortest form that reads back the same
}

void MetricSet::declare(const std::string& name, Type type, const std::string& help, std::vector<double> buckets) {
  if (families_.count(name)) return;
  order_.push_back(name);
  Family& f = families_[name];
  f.type = type;
  f.help = help;
  std::sort(buckets.begin(), buckets.end());
  f.buckets = std::move(buckets);
}

MetricSet::Family* MetricSet::find(const std::string& name, Type type) {
  auto it = families_.find(name);
  if (it == families_.end() || it->second.type != type) return nullptr;  // undeclared: a bug the tests catch
  return &it->second;
}

void MetricSet::add(const std::string& name, const MetricLabels& labels, double v) {
  Family* f = find(name, Type::Counter);
  if (!f || !(v >= 0)) return;
  f->values[render_labels(labels)] += v;
}

void MetricSet::set(const std::string& name, const MetricLabels& labels, double v) {
  Family* f = find(name, Type::Gauge);
  if (!f) f = find(name, Type::Counter);  // a counter kept elsewhere, read at a scrape
  if (f) f->values[render_labels(labels)] = v;
}

void MetricSet::observe(const std::string& name, const MetricLabels& labels, double v) {
  Family* f = find(name, Type::Histogram);
  if (!f || std::isnan(v)) return;
  Histogram& h = f->histograms[render_labels(labels)];
  if (h.counts.empty()) h.counts.assign(f->buckets.size(), 0);
  auto at = std::lower_bound(f->buckets.begin(), f->buckets.end(), v);  // the first bound >= v
  if (at != f->buckets.end()) ++h.counts[size_t(at - f->buckets.begin())];
  h.sum += v;
  ++h.count;
}

double MetricSet::value(const std::string& name, const MetricLabels& labels) const {
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  const Family& f = it->second;
  std::string key = render_labels(labels);
  if (f.type == Type::Histogram) {
    auto h = f.histograms.find(key);
    return h == f.histograms.end() ? 0 : double(h->second.count);
  }
  auto v = f.values.find(key);
  return v == f.values.end() ? 0 : v->second;
}

void MetricSet::render(std::string& out) const {
  for (const std::string& name : order_) {
    const Family& f = families_.at(name);
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escaped(f.help, false), name, type_name(f.type));
    for (const auto& [labels, v] : f.values) out += fmt::format("{}{} {}\n", name, labels, render_value(v));
    for (const auto& [labels, h] : f.histograms) {
      uint64_t cumulative = 0;
      for (size_t i = 0; i < f.buckets.size(); ++i) {
        cumulative += h.counts[i];
        out += fmt::format("{}_bucket{} {}\n", name, with_label(labels, "le", render_value(f.buckets[i])), cumulative);
      }
      out += fmt::format("{}_bucket{} {}\n", name, with_label(labels, "le", "+Inf"), h.count);
      out += fmt::format("{}_sum{} {}\n", name, labels, render_value(h.sum));
      out += fmt::format("{}_count{} {}\n", name, labels, h.count);
    }
  }
}

}  // namespace xferd
