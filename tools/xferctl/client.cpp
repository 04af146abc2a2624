#include "client.h"

#include "xfer/text.h"

#include <systemd/sd-bus.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <variant>

#include "xfer/options.h"
#include "credentials.h"
#include "progress.h"

namespace xferctl {

namespace {

constexpr const char* kName = "org.xferd.Xferd1";
constexpr const char* kManager = "/org/xferd/Xferd1";
constexpr const char* kManagerIface = "org.xferd.Manager1";
constexpr const char* kJobIface = "org.xferd.Job1";

enum Exit { kOk = 0, kSomeFailed = 1, kUsage = 2, kFatal = 3, kNoDaemon = 4, kCancelled = 130 };

// What went wrong talking to xferd, said for a person.
struct ClientError : std::runtime_error {
  ClientError(const std::string& m, int c) : std::runtime_error(m), code(c) {}
  int code;
};

std::string bus_where() {
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
Msg own(sd_bus_message* m) { return Msg(m, sd_bus_message_unref); }

void need(int r, const char* what) {
  if (r < 0) throw ClientError(fmt::format("unexpected reply ({}): {}", what, strerror(-r)), kFatal);
}

std::string job_path(const std::string& job) {
  if (!job.empty() && job[0] == '/') return job;
  if (job.empty() || job.find_first_not_of("0123456789") != std::string::npos)
    throw ClientError("JOB is a job number (as list shows) or its object path, not '" + job + "'", kUsage);
  return "/org/xferd/Xferd1/job/" + job;
}

// Every Job1 property, by GetAll, as JSON.
nlohmann::json job_properties(Bus& bus, const std::string& path) {
  Msg reply = own(bus.call(path.c_str(), "org.freedesktop.DBus.Properties", "GetAll",
                           [](sd_bus_message* m) { return sd_bus_message_append(m, "s", kJobIface); }));
  sd_bus_message* m = reply.get();
  nlohmann::json out = nlohmann::json::object();
  need(sd_bus_message_enter_container(m, 'a', "{sv}"), "properties");
  while (sd_bus_message_enter_container(m, 'e', "sv") > 0) {
    const char* key = nullptr;
    need(sd_bus_message_read(m, "s", &key), "property name");
    const char* contents = nullptr;
    char type = 0;
    need(sd_bus_message_peek_type(m, &type, &contents), "property");
    need(sd_bus_message_enter_container(m, 'v', contents), "property");
    std::string t = contents;
    if (t.size() == 1 && std::strchr("stuid", t[0])) {  // the basic types Job1 uses
      union {
        const char* s;
        uint64_t t;
        uint32_t u;
        int32_t i;
        double d;
      } v{};
      need(sd_bus_message_read_basic(m, t[0], &v), key);
      switch (t[0]) {
        case 's': out[key] = v.s; break;
        case 't': out[key] = v.t; break;
        case 'u': out[key] = v.u; break;
        case 'i': out[key] = v.i; break;
        default: out[key] = v.d;
      }
    } else if (t == "a(siii)") {
      nlohmann::json a = nlohmann::json::array();
      need(sd_bus_message_enter_container(m, 'a', "(siii)"), key);
      const char* kind = nullptr;
      int cc, p, pp;
      while (sd_bus_message_read(m, "(siii)", &kind, &cc, &p, &pp) > 0)
        a.push_back({{"kind", kind}, {"cc", cc}, {"p", p}, {"pp", pp}});
      need(sd_bus_message_exit_container(m), key);
      out[key] = a;
    } else {
      need(sd_bus_message_skip(m, contents), key);
    }
    need(sd_bus_message_exit_container(m), key);
    need(sd_bus_message_exit_container(m), key);
  }
  return out;
}

bool finished(const std::string& state) { return state == "done" || state == "failed" || state == "cancelled"; }

int exit_for(const nlohmann::json& props) {
  std::string st = props.value("State", "");
  if (st == "failed") return kFatal;
  if (st == "cancelled") return kCancelled;
  return props.value("FilesFailed", 0u) > 0 ? kSomeFailed : kOk;
}

void print_finished(const nlohmann::json& props, bool json) {
  nlohmann::json s = nlohmann::json::parse(props.value("Summary", std::string("{}")), nullptr, false);
  if (json) {
    std::cout << (s.is_discarded() ? props : s).dump(2, ' ', true) << std::endl;
    return;
  }
  std::string title = fmt::format("job {}", props.value("Id", uint64_t(0)));
  if (!s.is_discarded() && s.contains("seconds")) {
    print_result(s, title);
    if (s.contains("energy"))
      fmt::print("  {:<11} {:.2f} J ({})\n", "energy", s["energy"].value("joules", 0.0), s["energy"].value("source", "?"));
    if (s.contains("kernel") && s["kernel"].contains("note"))
      fmt::print("  {:<11} {}\n", "kernel", xfer::printable(s["kernel"]["note"].get<std::string>()));
  } else {
    fmt::print("{}: {}{}\n", title, xfer::printable(props.value("State", "?")),
               props.value("Error", std::string()).empty() ? "" : " — " + xfer::printable(props.value("Error", std::string())));
  }
}

// Follows a job until it ends: a progress bar on a terminal, else a line every
// few seconds; the Finished signal wakes it at once.
nlohmann::json follow(Bus& bus, const std::string& path, bool show_progress) {
  bool done_signal = false;
  sd_bus_slot* slot = nullptr;
  sd_bus_match_signal(
      bus.get(), &slot, kName, path.c_str(), kJobIface, "Finished",
      [](sd_bus_message*, void* ud, sd_bus_error*) {
        *static_cast<bool*>(ud) = true;
        return 0;
      },
      &done_signal);
  bool tty = show_progress && isatty(STDERR_FILENO);
  ProgressBar bar;
  int ticks = 0;
  nlohmann::json props;
  for (;;) {
    props = job_properties(bus, path);
    if (finished(props.value("State", "")) || done_signal) {
      if (!finished(props.value("State", ""))) props = job_properties(bus, path);
      break;
    }
    if (tty) {
      xfer::JobProgress p;
      p.bytes_done = props.value("BytesDone", uint64_t(0));
      p.bytes_total = props.value("BytesTotal", uint64_t(0));
      p.files_done = props.value("FilesDone", 0u);
      p.files_total = props.value("FilesTotal", 0u);
      p.files_failed = props.value("FilesFailed", 0u);
      bar.draw(p, props.value("State", "") + ", " + params_in_words(knobs_from_json(props["Params"])));
    } else if (show_progress && ticks % 20 == 0) {
      fmt::print(stderr, "{}: {}, {} of {} files, {} of {}, {:.1f} Mbit/s\n", path, props.value("State", ""),
                 props.value("FilesDone", 0u), props.value("FilesTotal", 0u),
                 human_bytes(double(props.value("BytesDone", uint64_t(0)))),
                 human_bytes(double(props.value("BytesTotal", uint64_t(0)))), props.value("ThroughputBps", 0.0) / 1e6);
    }
    ++ticks;
    // Wait up to 250 ms for anything (the Finished signal among it).
    while (sd_bus_process(bus.get(), nullptr) > 0) {
    }
    sd_bus_wait(bus.get(), 250000);
    while (sd_bus_process(bus.get(), nullptr) > 0) {
    }
  }
  if (tty) bar.finish();
  sd_bus_slot_unref(slot);
  return props;
}

std::string read_manifest(const std::string& path) {
  std::ostringstream out;
  if (path == "-") {
    out << std::cin.rdbuf();
  } else {
    std::ifstream in(path);
    if (!in) throw ClientError("cannot read the manifest " + path + ": " + strerror(errno), kUsage);
    out << in.rdbuf();
  }
  std::string text = out.str();
  // D-Bus strings end at a NUL: the daemon would see a manifest cut short.
  if (size_t nul = text.find('\0'); nul != std::string::npos) {
    size_t line = size_t(std::count(text.begin(), text.begin() + long(nul), '\n')) + 1;
    throw ClientError("the manifest " + xfer::printable(path) + " contains a NUL byte on line " + std::to_string(line) +
                          "; nothing submitted",
                      kUsage);
  }
  return text;
}

std::string absolute(const std::string& dir) {
  if (!dir.empty() && dir[0] == '/') return dir;
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) throw ClientError(std::string("getcwd: ") + strerror(errno), kFatal);
  return dir == "." ? cwd : std::string(cwd) + "/" + dir;
}

struct SubmitArgs {
  std::string manifest, dest = ".", policy;
  xfer::OptionValues options = xfer::OptionValues::object();  // flags of the option table (scope kJob)
  bool wait = false, json = false, no_progress = false;
  CredentialFlags credentials;
};

int submit(const SubmitArgs& a) {
  std::string text = read_manifest(a.manifest);
  std::string dest = absolute(a.dest);
  Bus bus;
  Msg reply = own(bus.call(kManager, kManagerIface, "SubmitManifest", [&](sd_bus_message* m) {
    int r = sd_bus_message_append(m, "sss", text.c_str(), dest.c_str(), a.policy.c_str());
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "{sv}");
    for (const auto& [key, value] : a.options.items()) {
      if (r < 0) break;
      const xfer::OptionSpec* o = xfer::find_option(key);
      // A file the daemon reads (as the caller) is named by its absolute path.
      if (o->type == xfer::OptionType::Path)
        r = sd_bus_message_append(m, "{sv}", key.c_str(), "s", absolute(value.get<std::string>()).c_str());
      else if (value.is_string())
        r = sd_bus_message_append(m, "{sv}", key.c_str(), "s", value.get<std::string>().c_str());
      else if (value.is_number_integer())
        r = sd_bus_message_append(m, "{sv}", key.c_str(), "x", value.get<int64_t>());
      else
        r = sd_bus_message_append(m, "{sv}", key.c_str(), "d", value.get<double>());
    }
    if (r >= 0 && a.credentials.any()) {
      r = sd_bus_message_open_container(m, 'e', "sv");
      if (r >= 0) r = sd_bus_message_append(m, "s", "credentials");
      if (r >= 0) r = sd_bus_message_open_container(m, 'v', "a{sv}");
      if (r >= 0) r = append_credentials(m, a.credentials);
      if (r >= 0) r = sd_bus_message_close_container(m);
      if (r >= 0) r = sd_bus_message_close_container(m);
    }
    if (r >= 0) r = sd_bus_message_close_container(m);
    return r;
  }));
  const char* path = nullptr;
  need(sd_bus_message_read(reply.get(), "o", &path), "job path");
  std::string p = path;
  if (!a.wait) {
    if (a.json) std::cout << nlohmann::json{{"job", p}}.dump() << std::endl;
    else fmt::print("{}\n", p);
    return kOk;
  }
  if (!a.json) fmt::print(stderr, "submitted: {}\n", p);
  nlohmann::json props = follow(bus, p, !a.no_progress && !a.json);
  print_finished(props, a.json);
  return exit_for(props);
}

int status(const std::string& job, bool json) {
  Bus bus;
  nlohmann::json props = job_properties(bus, job_path(job));
  if (json) {
    std::cout << props.dump(2, ' ', true) << std::endl;
    return kOk;
  }
  for (const char* k : {"Id", "State", "Owner", "Policy", "Label", "Destination", "FilesDone", "FilesTotal", "FilesFailed",
                        "BytesDone", "BytesTotal", "ThroughputBps", "EnergyJoules", "EnergySource", "Cores", "KernelNote",
                        "Class", "Allotment", "Waiting", "Error"}) {
    const auto& v = props[k];
    std::string s = v.is_string() ? v.get<std::string>() : v.dump();
    if (std::string(k) == "ThroughputBps") s = fmt::format("{:.1f} Mbit/s", v.get<double>() / 1e6);
    fmt::print("  {:<14} {}\n", k, xfer::printable(s));
  }
  fmt::print("  {:<14} {}\n", "Params", xfer::printable(params_in_words(knobs_from_json(props["Params"]))));
  return kOk;
}

struct ListRow {
  std::string path, state, policy, label;
  std::string shown_state, shown_policy, shown_label;  // escaped for a terminal
  uint64_t id = 0, done = 0, total = 0;
  uint32_t uid = 0;
};

std::vector<ListRow> list_jobs(Bus& bus) {
  Msg reply = own(bus.call(kManager, kManagerIface, "ListJobs"));
  sd_bus_message* m = reply.get();
  std::vector<ListRow> rows;
  need(sd_bus_message_enter_container(m, 'a', "(otussstt)"), "jobs");
  const char *path, *state, *policy, *label;
  ListRow r;
  while (sd_bus_message_read(m, "(otussstt)", &path, &r.id, &r.uid, &state, &policy, &label, &r.done, &r.total) > 0) {
    r.path = path;
    r.state = state;
    r.policy = policy;
    r.label = label;
    // Shown on a terminal: a label or policy name is the caller's text.
    r.shown_state = xfer::printable(state);
    r.shown_policy = xfer::printable(policy);
    r.shown_label = xfer::printable(label);
    rows.push_back(r);
  }
  return rows;
}

int list(bool json, bool history) {
  Bus bus;
  std::vector<ListRow> rows = list_jobs(bus);
  nlohmann::json out = nlohmann::json::array();
  if (!json) {
    if (history)
      fmt::print("{:>5} {:<10} {:<20} {:>9} {:>10} {:>9} {:>11} {:>10}  {}\n", "job", "state", "policy", "files", "bytes",
                 "seconds", "Mbit/s", "joules", "label");
    else
      fmt::print("{:>5} {:<11} {:>6} {:<20} {:>10} {:>10} {:<10} {:<18}  {}\n", "job", "state", "uid", "policy", "done",
                 "total", "class", "share", "label");
  }
  for (const ListRow& r : rows) {
    if (history != finished(r.state)) continue;
    if (!history) {
      // The arbiter's view: the class, and the share ("cap N Mbit/s" or "no
      // cap"; status shows why).
      nlohmann::json props = job_properties(bus, r.path);
      const std::string cls = props.value("Class", std::string()), allot = props.value("Allotment", std::string());
      const std::string share = allot.substr(0, allot.find(':'));
      if (json) out.push_back({{"job", r.id}, {"path", r.path}, {"state", r.state}, {"uid", r.uid}, {"policy", r.policy},
                               {"label", r.label}, {"bytes_done", r.done}, {"bytes_total", r.total}, {"class", cls},
                               {"allotment", allot}});
      else fmt::print("{:>5} {:<11} {:>6} {:<20} {:>10} {:>10} {:<10} {:<18}  {}\n", r.id, r.shown_state, r.uid,
                      r.shown_policy, human_bytes(double(r.done)), human_bytes(double(r.total)), xfer::printable(cls),
                      xfer::printable(share.empty() ? "-" : share), r.shown_label);
      continue;
    }
    nlohmann::json props = job_properties(bus, r.path);
    nlohmann::json s = nlohmann::json::parse(props.value("Summary", std::string("{}")), nullptr, false);
    if (s.is_discarded()) s = nlohmann::json::object();
    double secs = s.value("seconds", 0.0), mbps = s.value("throughput_mbps", 0.0);
    double joules = s.contains("energy") ? s["energy"].value("joules", 0.0) : 0.0;
    if (json) {
      out.push_back({{"job", r.id}, {"state", r.state}, {"policy", r.policy}, {"label", r.label}, {"summary", s}});
      continue;
    }
    fmt::print("{:>5} {:<10} {:<20} {:>4}/{:<4} {:>10} {:>9.2f} {:>11.1f} {:>10.2f}  {}\n", r.id, r.shown_state,
               r.shown_policy, s.value("files_ok", 0) + s.value("files_skipped", 0), s.value("files", 0),
               human_bytes(double(r.done)), secs, mbps, joules, r.shown_label);
  }
  if (json) std::cout << out.dump(2, ' ', true) << std::endl;
  return kOk;
}

int job_call(const std::string& job, const char* method) {
  Bus bus;
  std::string p = job_path(job);
  own(bus.call(p.c_str(), kJobIface, method));
  fmt::print("{}: {}\n", p, std::string(method) == "Cancel" ? "cancelled" : std::string(method) == "Pause" ? "paused" : "resumed");
  return kOk;
}

int set_credentials(const std::string& job, const CredentialFlags& c) {
  if (!c.any()) throw ClientError("no credentials given (--bearer-token-file, --user with --password-file, ...)", kUsage);
  Bus bus;
  std::string p = job_path(job);
  own(bus.call(p.c_str(), kJobIface, "SetCredentials", [&](sd_bus_message* m) { return append_credentials(m, c); }));
  fmt::print("{}: credentials given\n", p);
  return kOk;
}

int policies(bool json) {
  Bus bus;
  Msg reply = own(bus.call(kManager, kManagerIface, "GetPolicies"));
  sd_bus_message* m = reply.get();
  need(sd_bus_message_enter_container(m, 'a', "(ssbbs)"), "policies");
  const char *name, *algo, *desc;
  int kernel, usable;
  nlohmann::json out = nlohmann::json::array();
  if (!json) fmt::print("{:<22} {:<18} {:<7} {:<6} {}\n", "policy", "algorithm", "kernel", "yours", "description");
  while (sd_bus_message_read(m, "(ssbbs)", &name, &algo, &kernel, &usable, &desc) > 0) {
    if (json)
      out.push_back({{"name", name}, {"algorithm", algo}, {"kernel", bool(kernel)}, {"usable", bool(usable)}, {"description", desc}});
    else
      fmt::print("{:<22} {:<18} {:<7} {:<6} {}\n", xfer::printable(name), xfer::printable(algo), kernel ? "yes" : "no",
                 usable ? "yes" : "no", xfer::printable(desc));
  }
  if (json) std::cout << out.dump(2, ' ', true) << std::endl;
  return kOk;
}

int guarded(const std::function<int()>& f) {
  try {
    return f();
  } catch (const ClientError& e) {
    fmt::print(stderr, "xferctl: {}\n", xfer::printable(e.what()));
    return e.code;
  } catch (const std::runtime_error& e) {  // a credential file that cannot be opened
    fmt::print(stderr, "xferctl: {}\n", xfer::printable(e.what()));
    return kUsage;
  }
}

}  // namespace

void add_table_flags(CLI::App* cmd, xfer::OptionScope scope, xfer::OptionValues& into,
                     const xfer::OptionValues* shown_defaults) {
  for (const xfer::OptionSpec& o : xfer::option_table()) {
    if (!(o.scopes & scope)) continue;
    std::string help = o.help;
    if (shown_defaults && shown_defaults->contains(o.name)) {
      const auto& d = (*shown_defaults)[o.name];
      help += " (default: " + (d.is_string() ? d.get<std::string>() : d.dump()) + ")";
    }
    auto read = [&o](const std::string& text, std::string* why) { return xfer::option_from_text(o, text, why); };
    cmd->add_option_function<std::string>(
           o.flag_name(),
           [&into, &o, read](const std::string& text) {
             std::string why;
             into[o.name] = read(text, &why);
           },
           help)
        ->check(CLI::Validator(
            [read](std::string& text) {
              std::string why;
              read(text, &why);
              return why;
            },
            "", o.name));
  }
}

std::function<int()> add_client_commands(CLI::App& app) {
  auto sa = std::make_shared<SubmitArgs>();
  CLI::App* submit_cmd = app.add_subcommand("submit", "submit a job to xferd (D-Bus)");
  submit_cmd->add_option("--manifest", sa->manifest, "manifest: one 'URL [SIZE] [sha256:HEX]' a line; - for stdin")->required();
  submit_cmd->add_option("--dest", sa->dest, "destination directory (default: here)");
  submit_cmd->add_option("--policy", sa->policy, "SLA policy by name (xferctl policies); default: the daemon's");
  add_table_flags(submit_cmd, xfer::kJob, sa->options);
  add_credential_flags(submit_cmd, sa->credentials);
  submit_cmd->add_flag("--wait", sa->wait, "follow the job until it ends (progress bar on a terminal), show the result");
  submit_cmd->add_flag("--json", sa->json, "print JSON (with --wait: the job's summary)");
  submit_cmd->add_flag("--no-progress", sa->no_progress, "no progress while waiting");

  auto job = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* status_cmd = app.add_subcommand("status", "a job's state, progress, params and energy");
  status_cmd->add_option("JOB", *job, "job number or object path")->required();
  status_cmd->add_flag("--json", *json, "all properties as JSON");
  CLI::App* list_cmd = app.add_subcommand("list", "jobs not yet finished (yours; root sees all)");
  list_cmd->add_flag("--json", *json, "JSON");
  CLI::App* history_cmd = app.add_subcommand("history", "finished jobs with their results");
  history_cmd->add_flag("--json", *json, "JSON, with each job's summary");
  std::map<CLI::App*, const char*> job_calls;
  for (auto [name, method, help] : {std::tuple{"cancel", "Cancel", "stop a job"}, std::tuple{"pause", "Pause", "pause a job"},
                                    std::tuple{"resume", "Resume", "resume a paused job"}}) {
    CLI::App* c = app.add_subcommand(name, help);
    c->add_option("JOB", *job, "job number or object path")->required();
    job_calls[c] = method;
  }
  auto creds = std::make_shared<CredentialFlags>();
  CLI::App* creds_cmd = app.add_subcommand(
      "credentials", "give a job its credentials again (it waits for them after a restart, or when refused mid-job)");
  creds_cmd->add_option("JOB", *job, "job number or object path")->required();
  add_credential_flags(creds_cmd, *creds);
  auto watch_json = std::make_shared<bool>(false);
  CLI::App* watch_cmd = app.add_subcommand("watch", "follow a job until it ends, then show its result");
  watch_cmd->add_option("JOB", *job, "job number or object path")->required();
  watch_cmd->add_flag("--json", *watch_json, "print the summary as JSON");
  CLI::App* policies_cmd = app.add_subcommand("policies", "the daemon's SLA policies and whether you may use them");
  policies_cmd->add_flag("--json", *json, "JSON");

  return [=]() -> int {
    if (*submit_cmd) return guarded([&] { return submit(*sa); });
    if (*status_cmd) return guarded([&] { return status(*job, *json); });
    if (*list_cmd) return guarded([&] { return list(*json, false); });
    if (*history_cmd) return guarded([&] { return list(*json, true); });
    if (*policies_cmd) return guarded([&] { return policies(*json); });
    if (*creds_cmd) return guarded([&] { return set_credentials(*job, *creds); });
    if (*watch_cmd)
      return guarded([&] {
        Bus bus;
        nlohmann::json props = follow(bus, job_path(*job), !*watch_json);
        print_finished(props, *watch_json);
        return exit_for(props);
      });
    for (const auto& [cmd, method] : job_calls)
      if (*cmd) return guarded([&] { return job_call(*job, method); });
    return -1;
  };
}

}  // namespace xferctl
