// EnergySplit: energy divided by what bytes and connections cost (energy.h).
#include <fmt/format.h>

#include "xfer/energy.h"

namespace xfer {

void EnergySplit::add(double joules, const std::vector<double>& bytes, const std::vector<double>& conn_s) {
  double x1 = 0, x2 = 0;
  for (double b : bytes) x1 += b;
  for (double c : conn_s) x2 += c;
  if (x1 <= 0 && x2 <= 0) return;
  s11_ *= forget_, s12_ *= forget_, s22_ *= forget_, s1y_ *= forget_, s2y_ *= forget_;
  s11_ += x1 * x1, s12_ += x1 * x2, s22_ += x2 * x2, s1y_ += x1 * joules, s2y_ += x2 * joules;
  ++n_;
  double det = s11_ * s22_ - s12_ * s12_;
  a_ = b_ = 0;
  if (n_ < kMinSamples || det <= 1e-6 * s11_ * s22_) return;  // too few, or bytes and connections moved together
  a_ = (s1y_ * s22_ - s2y_ * s12_) / det;
  b_ = (s2y_ * s11_ - s1y_ * s12_) / det;
}

bool EnergySplit::fitted() const { return a_ >= 0 && b_ >= 0 && (a_ > 0 || b_ > 0); }

std::vector<double> EnergySplit::shares(const std::vector<double>& bytes, const std::vector<double>& conn_s) const {
  std::vector<double> w(bytes.size(), 0);
  double sum = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    sum += w[i] = fitted() ? a_ * bytes[i] + b_ * (i < conn_s.size() ? conn_s[i] : 0) : bytes[i];
  for (double& x : w) x = sum > 0 ? x / sum : 1.0 / double(w.size());
  return w;
}

std::string EnergySplit::basis() const {
  if (fitted())
    return fmt::format("by what each one's bytes and connections cost (fitted over {} samples: {:.3g} J/GB, {:.3g} J "
                       "per connection-second)",
                       n_, a_ * 1e9, b_);
  return fmt::format("by bytes (the cost of bytes and of connections is not fitted yet: {} of {} samples{})", n_,
                     kMinSamples, n_ >= kMinSamples ? "; the two moved together, or a cost came out below zero" : "");
}

}  // namespace xfer
