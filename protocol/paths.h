// Where xferd and xferctl keep their files: the product's paths, given to
// libxfer by its two front ends (libxfer itself assumes none).
#pragma once

namespace xferd {

inline constexpr const char* kConfigFile = "/etc/xferd/xferd.conf";
inline constexpr const char* kConfigDir = "/etc/xferd/xferd.conf.d";
inline constexpr const char* kStateDir = "/var/lib/xferd";
// The journal of the cores and frequency the kernel layer changed: one for
// xferd and xferctl run alike, so that only one of them turns the layer.
inline constexpr const char* kKernelState = "/run/xferd/kernel-state.json";
// Where `xferctl calibrate` writes the fitted power model, and xferd
// ([energy] power_model) and xferctl run (--model) read it.
inline constexpr const char* kPowerModel = "/etc/xferd/power-model.toml";

}  // namespace xferd
