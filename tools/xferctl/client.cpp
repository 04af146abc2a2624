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
#include "bus_client.h"
#include "plot.h"
#include "progress.h"
#include "top.h"

namespace xferctl {

namespace {

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

// The job's timeline drawn into file (plot.h), from its Report.
int plot(Bus& bus, const std::string& job, const std::string& file) {
  std::string path = job_path(job);
  Msg reply = own(bus.call(path.c_str(), kJobIface, "Report"));
  const char* text = nullptr;
  need(sd_bus_message_read(reply.get(), "s", &text), "report");
  nlohmann::json r = nlohmann::json::parse(text ? text : "", nullptr, false);
  if (!r.is_object()) throw ClientError("job " + job + " has no report yet", kUsage);
  std::string svg;
  try {
    svg = job_plot_svg(r, fmt::format("job {} ({}): {}", r.value("job", uint64_t(0)), r.value("policy", "?"),
                                      r.value("state", "?")));
  } catch (const std::runtime_error& e) {
    throw ClientError("job " + job + ": " + e.what(), kUsage);
  }
  std::ofstream out(file);
  if (!(out << svg)) throw ClientError("cannot write " + xfer::printable(file) + ": " + strerror(errno), kFatal);
  fmt::print("{}: the timeline of job {} ({} intervals)\n", xfer::printable(file), job, r["timeline"].size());
  return kOk;
}

int status(const std::string& job, bool json, const std::string& plot_file) {
  Bus bus;
  if (!plot_file.empty()) return plot(bus, job, plot_file);
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
  auto plot_file = std::make_shared<std::string>();
  status_cmd->add_option("--plot", *plot_file,
                         "draw the job's timeline into this SVG file: throughput and power, its floor or ceiling, "
                         "parameter changes and cross traffic");
  auto top_delay = std::make_shared<double>(1.0);
  auto top_once = std::make_shared<bool>(false);
  CLI::App* top_cmd = app.add_subcommand("top", "a live view of the jobs you may see (root: all) and the machine; q quits");
  top_cmd->add_option("--delay", *top_delay, "seconds between refreshes")->check(CLI::Range(0.2, 60.0));
  top_cmd->add_flag("--once", *top_once, "print one screen as text and exit");
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
    if (*status_cmd) return guarded([&] { return status(*job, *json, *plot_file); });
    if (*top_cmd) return guarded([&] { return top(*top_delay, *top_once); });
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
