// xferctl's side of the bus: the connection to xferd (the system bus, or
// DBUS_SYSTEM_BUS_ADDRESS), its calls with errors said for a person, and the
// properties of its objects as JSON. Shared by the client commands and top.
#pragma once

#include <systemd/sd-bus.h>
#include <unistd.h>

#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace xferctl {

inline constexpr const char* kName = "org.xferd.Xferd1";
inline constexpr const char* kManager = "/org/xferd/Xferd1";
inline constexpr const char* kManagerIface = "org.xferd.Manager1";
inline constexpr const char* kJobIface = "org.xferd.Job1";

enum Exit { kOk = 0, kSomeFailed = 1, kUsage = 2, kFatal = 3, kNoDaemon = 4, kCancelled = 130 };

// What went wrong talking to xferd, said for a person.
struct ClientError : std::runtime_error {
  ClientError(const std::string& m, int c) : std::runtime_error(m), code(c) {}
  int code;
};

inline std::string bus_where() {
  const char* env = getenv("DBUS_SYSTEM_BUS_ADDRESS");
  return env ? std::string("DBUS_SYSTEM_BUS_ADDRESS=") + env : "the system bus";
}

class Bus {
 public:
  Bus() {
    int r = sd_bus_open_system(&bus_);
    if (r < 0)
      throw ClientError(fmt::format("cannot connect to {}: {}. Is dbus running? For a private bus set "
                                    "DBUS_SYSTEM_BUS_ADDRESS.",
                                    bus_where(), strerror(-r)),
                        kNoDaemon);
  }
  ~Bus() { sd_bus_flush_close_unref(bus_); }
  sd_bus* get() const { return bus_; }

  // Calls a method; fill appends the arguments. Throws ClientError.
  sd_bus_message* call(const char* path, const char* iface, const char* member,
                       const std::function<int(sd_bus_message*)>& fill = {}) {
    sd_bus_message* m = nullptr;
    int r = sd_bus_message_new_method_call(bus_, &m, kName, path, iface, member);
    try {
      if (r >= 0 && fill) r = fill(m);
    } catch (...) {
      sd_bus_message_unref(m);  // a sensitive message is wiped as it goes
      throw;
    }
    if (r < 0) {
      sd_bus_message_unref(m);
      throw ClientError(fmt::format("cannot build the {} call: {}", member, strerror(-r)), kFatal);
    }
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message* reply = nullptr;
    r = sd_bus_call(bus_, m, 0, &e, &reply);
    sd_bus_message_unref(m);
    if (r < 0) {
      std::string name = e.name ? e.name : "", msg = e.message ? e.message : strerror(-r);
      sd_bus_error_free(&e);
      if (name == "org.freedesktop.DBus.Error.ServiceUnknown" || name == "org.freedesktop.DBus.Error.NameHasNoOwner")
        throw ClientError(fmt::format("xferd is not running: nobody owns {} on {}. Start it (systemctl start xferd), "
                                      "or run build/bin/xferd.",
                                      kName, bus_where()),
                          kNoDaemon);
      if (name == "org.freedesktop.DBus.Error.UnknownObject" || name == "org.freedesktop.DBus.Error.UnknownMethod")
        throw ClientError(fmt::format("{}: no such job or method ({})", path, msg), kUsage);
      throw ClientError(fmt::format("{} refused ({}): {}", member, name, msg), name.rfind("org.xferd.Xferd1.Error.", 0) == 0 ? kUsage : kFatal);
    }
    return reply;
  }

 private:
  sd_bus* bus_ = nullptr;
};

using Msg = std::unique_ptr<sd_bus_message, decltype(&sd_bus_message_unref)>;
inline Msg own(sd_bus_message* m) { return Msg(m, sd_bus_message_unref); }

inline void need(int r, const char* what) {
  if (r < 0) throw ClientError(fmt::format("unexpected reply ({}): {}", what, strerror(-r)), kFatal);
}

inline std::string job_path(const std::string& job) {
  if (!job.empty() && job[0] == '/') return job;
  if (job.empty() || job.find_first_not_of("0123456789") != std::string::npos)
    throw ClientError("JOB is a job number (as list shows) or its object path, not '" + job + "'", kUsage);
  return "/org/xferd/Xferd1/job/" + job;
}

// Every property of an object's interface, by GetAll, as JSON (the basic
// types and Job1's Params; other types are skipped).
nlohmann::json properties(Bus& bus, const std::string& path, const char* iface);
inline nlohmann::json job_properties(Bus& bus, const std::string& path) { return properties(bus, path, kJobIface); }

// ListJobs: the jobs the caller may see (root: all).
struct ListRow {
  std::string path, state, policy, label;
  std::string shown_state, shown_policy, shown_label;  // escaped for a terminal
  uint64_t id = 0, done = 0, total = 0;
  uint32_t uid = 0;
};

std::vector<ListRow> list_jobs(Bus& bus);

}  // namespace xferctl
