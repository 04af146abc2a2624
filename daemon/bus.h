// Service on D-Bus: org.xferd.Manager1 at /org/xferd/Xferd1 and one
// org.xferd.Job1 object per job under /org/xferd/Xferd1/job/N, as described
// in org.xferd.Xferd1.xml next to this file.
#pragma once

#include <systemd/sd-bus.h>

#include "service.h"

namespace xferd {

inline constexpr const char* kBusName = "org.xferd.Xferd1";
inline constexpr const char* kManagerPath = "/org/xferd/Xferd1";
inline constexpr const char* kJobPrefix = "/org/xferd/Xferd1/job";

// Registers the objects, the argument check and the service's hooks. Returns a negative errno.
int bus_register(Service& s, sd_bus* bus);

}  // namespace xferd
