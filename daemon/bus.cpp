#include "bus.h"

#include <cstring>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <variant>
#include <vector>

#include "submit_args.h"
#include "xfer/log.h"

namespace xferd {

namespace log = xfer::log;

namespace {

Service& svc(void* ud) { return *static_cast<Service*>(ud); }

// What a reply or a log line says of a refusal: bounded, whatever the caller
// sent that it quotes (kMaxMessage bytes, then how long it was).
constexpr size_t kMaxMessage = 4096;
std::string bounded(const char* what) {
  std::string_view w(what);
  if (w.size() <= kMaxMessage) return std::string(w);
  return std::string(w.substr(0, kMaxMessage)) + "... (" + std::to_string(w.size()) + " bytes)";
}

void log_refusal(sd_bus_message* m, const Refusal& r) {
  log::info("refused {} from {}: {}: {}", sd_bus_message_get_member(m), sd_bus_message_get_sender(m) ?: "?", r.name,
            bounded(r.what()));
}

// A refusal (or anything thrown) becomes the caller's D-Bus error.
template <class F>
int guarded(sd_bus_message* m, sd_bus_error* e, F&& f) {
  try {
    return f();
  } catch (const Refusal& r) {
    log_refusal(m, r);
    return sd_bus_error_set(e, r.name, bounded(r.what()).c_str());
  } catch (const std::exception& x) {
    log::error("{}: {}", sd_bus_message_get_member(m), bounded(x.what()));
    return sd_bus_error_set(e, err::kInternal, bounded(x.what()).c_str());
  }
}

Caller need_caller(sd_bus_message* m) {
  Caller c;
  int r = caller_of(m, &c);
  if (r < 0) throw Refusal(err::kInvalidArguments, std::string("the bus does not say who the caller is: ") + strerror(-r));
  return c;
}

// Submit's reply, sent once the caller's destination has been opened as the
// caller (the handler returns before: sd-bus sends nothing for it).
Service::SubmitReply deferred_reply(sd_bus_message* m, Service& s) {
  std::shared_ptr<sd_bus_message> held(sd_bus_message_ref(m), sd_bus_message_unref);
  return [held, &s](uint64_t id, const Refusal* r) {
    int rc;
    if (r) {
      log_refusal(held.get(), *r);
      sd_bus_error e = SD_BUS_ERROR_NULL;
      std::string text = bounded(r->what());
      sd_bus_error_set(&e, r->name, text.c_str());
      rc = sd_bus_reply_method_error(held.get(), &e);
      sd_bus_error_free(&e);
    } else {
      if (auto it = s.jobs.find(id); it != s.jobs.end()) it->second->watch(sd_bus_message_get_sender(held.get()));
      rc = sd_bus_reply_method_return(held.get(), "o", job_path(id).c_str());
    }
    if (rc < 0) log::warn("Submit: the reply to {} could not be sent: {}", sd_bus_message_get_sender(held.get()) ?: "?",
                          strerror(-rc));
  };
}

int method_submit(sd_bus_message* m, void* ud, sd_bus_error* e) {
  sd_bus_message_sensitive(m);  // it may carry credentials: wiped when freed
  return guarded(m, e, [&] {
    Caller c = need_caller(m);
    SubmitRequest req = read_submit(m, svc(ud).entry_limit(c));
    svc(ud).submit(c, std::move(req), deferred_reply(m, svc(ud)));
    return 1;
  });
}

int method_submit_manifest(sd_bus_message* m, void* ud, sd_bus_error* e) {
  sd_bus_message_sensitive(m);
  return guarded(m, e, [&] {
    Caller c = need_caller(m);
    SubmitRequest req = read_submit_manifest(m, svc(ud).entry_limit(c));
    svc(ud).submit(c, std::move(req), deferred_reply(m, svc(ud)));
    return 1;
  });
}

// A reply of one array of structs; add(reply) appends each element with `element`.
template <class F>
int reply_array(sd_bus_message* m, const char* element, F&& add) {
  sd_bus_message* reply = nullptr;
  check(sd_bus_message_new_method_return(m, &reply), "reply");
  std::unique_ptr<sd_bus_message, decltype(&sd_bus_message_unref)> hold(reply, sd_bus_message_unref);
  check(sd_bus_message_open_container(reply, 'a', element), "reply");
  add(reply);
  check(sd_bus_message_close_container(reply), "reply");
  return sd_bus_send(nullptr, reply, nullptr);
}

int method_list_jobs(sd_bus_message* m, void* ud, sd_bus_error* e) {
  return guarded(m, e, [&] {
    Caller c = need_caller(m);
    return reply_array(m, "(otussstt)", [&](sd_bus_message* reply) {
      for (const auto& [id, j] : svc(ud).jobs) {
        if (!c.root() && j->row.uid != c.uid) continue;  // a user sees their own jobs
        xfer::JobProgress p = j->live_progress();
        check(sd_bus_message_append(reply, "(otussstt)", j->path().c_str(), uint64_t(id), uint32_t(j->row.uid),
                                    xfer::to_string(j->state), j->row.policy.c_str(), j->label.c_str(), p.bytes_done,
                                    p.bytes_total),
              "reply");
      }
    });
  });
}

int method_get_policies(sd_bus_message* m, void* ud, sd_bus_error* e) {
  return guarded(m, e, [&] {
    Caller c = need_caller(m);
    Service& s = svc(ud);
    return reply_array(m, "(ssbbs)", [&](sd_bus_message* reply) {
      for (const auto& [name, p] : s.cfg.policies) {
        // The policy's own options (the registry's): those it sets, and
        // those a job may give it in Submit's options.
        std::string d = p.description, per_job;
        if (const xfer::TunerEntry* t = xfer::find_tuner(p.algorithm))
          for (const std::string& k : t->takes) {
            if (p.values.contains(k)) d += fmt::format(" [{} = {}]", k, p.values[k].dump());
            else if (const xfer::OptionSpec* o = xfer::find_option(k); o && (o->scopes & xfer::kJob))
              per_job += (per_job.empty() ? "" : ", ") + k;
          }
        if (!per_job.empty()) d += " [a job may give " + per_job + "]";
        if (p.algorithm.rfind("hla-", 0) == 0) d += " [" + s.hla_table_state() + "]";
        check(sd_bus_message_append(reply, "(ssbbs)", name.c_str(), p.algorithm.c_str(), int(p.kernel),
                                    int(may_use(s.cfg, p, c)), d.c_str()),
              "reply");
      }
    });
  });
}

int method_reload(sd_bus_message* m, void* ud, sd_bus_error* e) {
  return guarded(m, e, [&] {
    Caller c = need_caller(m);
    if (!c.root()) throw Refusal(err::kNotPrivileged, "only root may reload xferd's configuration");
    std::string why = svc(ud).reload();
    if (!why.empty()) throw Refusal(err::kConfig, why + "; the configuration in use is kept");
    return sd_bus_reply_method_return(m, "");
  });
}

int prop_version(sd_bus*, const char*, const char*, const char*, sd_bus_message* reply, void*, sd_bus_error*) {
  return sd_bus_message_append(reply, "s", XFERD_VERSION);
}

// The machine as the jobs share it, read when asked (xferctl top).
int prop_machine(sd_bus*, const char*, const char*, const char* property, sd_bus_message* reply, void* ud,
                 sd_bus_error*) {
  Service& s = svc(ud);
  std::string_view n = property;
  if (n == "OnlineCpus") return sd_bus_message_append(reply, "u", uint32_t(s.online_cpus()));
  if (n == "CpuFrequencyKHz") return sd_bus_message_append(reply, "t", uint64_t(std::max(0L, s.cpu_khz())));
  if (n == "LinkCapacityBps") return sd_bus_message_append(reply, "d", s.node.arbiter().capacity_bps());
  return -ENOENT;
}

// Job1 ------------------------------------------------------------------

JobRecord& entry(void* ud) { return *static_cast<JobRecord*>(ud); }

template <void (Service::*Op)(const Caller&, JobRecord&)>
int job_method(sd_bus_message* m, void* ud, sd_bus_error* e) {
  return guarded(m, e, [&] {
    Caller c = need_caller(m);
    JobRecord& j = entry(ud);
    (j.service->*Op)(c, j);
    return sd_bus_reply_method_return(m, "");
  });
}

// The job's report (its owner or root: find_job answers no one else).
int method_report(sd_bus_message* m, void* ud, sd_bus_error* e) {
  return guarded(m, e, [&] {
    JobRecord& j = entry(ud);
    return sd_bus_reply_method_return(m, "s", j.service->report(j).c_str());
  });
}

int method_set_credentials(sd_bus_message* m, void* ud, sd_bus_error* e) {
  sd_bus_message_sensitive(m);
  return guarded(m, e, [&] {
    Caller c = need_caller(m);
    JobRecord& j = entry(ud);
    j.service->set_credentials(c, j, read_credentials(m));
    return sd_bus_reply_method_return(m, "");
  });
}

// A job property's value, typed: what Get answers and what PropertiesChanged
// compares with what it announced last.
using ParamsValue = std::vector<std::tuple<std::string, int, int, int>>;
using PropValue = std::variant<uint64_t, uint32_t, int32_t, double, std::string, ParamsValue>;

// Every property of a job, once: its name, D-Bus type, whether it changes
// while the job lives (EMITS_CHANGE; else const), and its value. The vtable,
// Get and PropertiesChanged (in this order) are made from it. Summary here is
// the one in memory (set between a job's end and its Finished signal); Get
// reads a finished job's from the store.
struct JobProperty {
  const char* name;
  const char* type;
  bool changes;
  PropValue (*value)(const JobRecord& j, const xfer::JobProgress& p);
};

const JobProperty kJobProperties[] = {
    {"Id", "t", false, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return uint64_t(j.row.id); }},
    {"Owner", "u", false, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return uint32_t(j.row.uid); }},
    {"Destination", "s", false, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.row.dest; }},
    {"Label", "s", false, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.label; }},
    {"Policy", "s", false, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.row.policy; }},
    {"State", "s", true,
     [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return std::string(xfer::to_string(j.state)); }},
    {"BytesDone", "t", true,
     [](const JobRecord&, const xfer::JobProgress& p) -> PropValue { return uint64_t(p.bytes_done); }},
    {"BytesTotal", "t", true,
     [](const JobRecord&, const xfer::JobProgress& p) -> PropValue { return uint64_t(p.bytes_total); }},
    {"FilesDone", "u", true,
     [](const JobRecord&, const xfer::JobProgress& p) -> PropValue { return uint32_t(p.files_done + p.files_skipped); }},
    {"FilesTotal", "u", true,
     [](const JobRecord&, const xfer::JobProgress& p) -> PropValue { return uint32_t(p.files_total); }},
    {"FilesFailed", "u", true,
     [](const JobRecord&, const xfer::JobProgress& p) -> PropValue { return uint32_t(p.files_failed); }},
    {"ThroughputBps", "d", true, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.throughput_bps; }},
    {"EnergyJoules", "d", true, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.joules; }},
    {"EnergySource", "s", true, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.energy_source; }},
    {"Params", "a(siii)", true,
     [](const JobRecord& j, const xfer::JobProgress&) -> PropValue {
       ParamsValue v;
       for (size_t i = 0; i < j.params.chunks.size(); ++i) {
         const xfer::ChunkParams& c = j.params.chunks[i];
         v.emplace_back(i < j.kinds.size() ? j.kinds[i] : "?", c.cc, c.p, c.pp);
       }
       return v;
     }},
    {"Cores", "i", true, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return int32_t(j.params.cores); }},
    {"KernelNote", "s", true, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.kernel_note; }},
    {"Class", "s", true,
     [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return std::string(xfer::to_string(j.cls)); }},
    {"Allotment", "s", true, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.allotment(); }},
    {"Waiting", "s", true, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.waiting; }},
    {"SlaPromise", "s", true, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.sla.promise(); }},
    {"Sla", "s", true,
     [](const JobRecord& j, const xfer::JobProgress&) -> PropValue {
       return std::string(!j.sla.last ? "" : *j.sla.last ? "met" : "missed");
     }},
    {"SlaIntervalsMet", "u", true, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.sla.met; }},
    {"SlaIntervalsMissed", "u", true,
     [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.sla.missed; }},
    {"Error", "s", true, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.error; }},
    {"Summary", "s", true, [](const JobRecord& j, const xfer::JobProgress&) -> PropValue { return j.summary; }},
};

// nullopt: no such property.
std::optional<PropValue> property_value(const JobRecord& j, std::string_view n) {
  for (const JobProperty& p : kJobProperties)
    if (n == p.name) return p.value(j, j.live_progress());
  return std::nullopt;
}

int append_value(sd_bus_message* r, const PropValue& v) {
  return std::visit(
      [r](const auto& x) -> int {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, uint64_t>) return sd_bus_message_append(r, "t", x);
        else if constexpr (std::is_same_v<T, uint32_t>) return sd_bus_message_append(r, "u", x);
        else if constexpr (std::is_same_v<T, int32_t>) return sd_bus_message_append(r, "i", x);
        else if constexpr (std::is_same_v<T, double>) return sd_bus_message_append(r, "d", x);
        else if constexpr (std::is_same_v<T, std::string>) return sd_bus_message_append(r, "s", x.c_str());
        else {
          int rc = sd_bus_message_open_container(r, 'a', "(siii)");
          for (const auto& [kind, cc, p, pp] : x)
            if (rc >= 0) rc = sd_bus_message_append(r, "(siii)", kind.c_str(), cc, p, pp);
          return rc < 0 ? rc : sd_bus_message_close_container(r);
        }
      },
      v);
}

int job_property(sd_bus*, const char*, const char*, const char* property, sd_bus_message* r, void* ud, sd_bus_error*) {
  JobRecord& j = entry(ud);
  std::string_view n = property;
  if (n == "Summary" && j.finished() && j.summary.empty()) {
    std::string kept;  // a finished job's summary lives in the store only
    try {
      kept = j.service->store->summary(j.row.id);
    } catch (const StoreError& e) {
      log::error("job {}: {}", j.row.id, e.what());
    }
    return sd_bus_message_append(r, "s", kept.c_str());
  }
  std::optional<PropValue> v = property_value(j, n);
  return v ? append_value(r, *v) : -ENOENT;
}

constexpr uint64_t kChanges = SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE;
constexpr uint64_t kConst = SD_BUS_VTABLE_PROPERTY_CONST;

const sd_bus_vtable manager_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Version", "s", prop_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("OnlineCpus", "u", prop_machine, 0, 0),
    SD_BUS_PROPERTY("CpuFrequencyKHz", "t", prop_machine, 0, 0),
    SD_BUS_PROPERTY("LinkCapacityBps", "d", prop_machine, 0, 0),
    SD_BUS_METHOD_WITH_NAMES("Submit", "a(sts)ssa{sv}",
                             SD_BUS_PARAM(entries) SD_BUS_PARAM(destination) SD_BUS_PARAM(policy) SD_BUS_PARAM(options),
                             "o", SD_BUS_PARAM(job), method_submit, SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_SENSITIVE),
    SD_BUS_METHOD_WITH_NAMES("SubmitManifest", "sssa{sv}",
                             SD_BUS_PARAM(manifest) SD_BUS_PARAM(destination) SD_BUS_PARAM(policy) SD_BUS_PARAM(options),
                             "o", SD_BUS_PARAM(job), method_submit_manifest,
                             SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_SENSITIVE),
    SD_BUS_METHOD_WITH_NAMES("ListJobs", "", , "a(otussstt)", SD_BUS_PARAM(jobs), method_list_jobs,
                             SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("GetPolicies", "", , "a(ssbbs)", SD_BUS_PARAM(policies), method_get_policies,
                             SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Reload", "", "", method_reload, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END};

// The job's vtable: its properties from kJobProperties, then its methods
// and signal.
const sd_bus_vtable* job_vtable() {
  static const std::vector<sd_bus_vtable> v = [] {
    std::vector<sd_bus_vtable> t;
    t.push_back(SD_BUS_VTABLE_START(0));
    for (const JobProperty& p : kJobProperties)
      t.push_back(SD_BUS_PROPERTY(p.name, p.type, job_property, 0, p.changes ? kChanges : kConst));
    t.push_back(SD_BUS_METHOD("Cancel", "", "", job_method<&Service::cancel>, SD_BUS_VTABLE_UNPRIVILEGED));
    t.push_back(SD_BUS_METHOD("Pause", "", "", job_method<&Service::pause>, SD_BUS_VTABLE_UNPRIVILEGED));
    t.push_back(SD_BUS_METHOD("Resume", "", "", job_method<&Service::resume>, SD_BUS_VTABLE_UNPRIVILEGED));
    t.push_back(SD_BUS_METHOD_WITH_NAMES("Report", "", , "s", SD_BUS_PARAM(report), method_report,
                                         SD_BUS_VTABLE_UNPRIVILEGED));
    t.push_back(SD_BUS_METHOD_WITH_NAMES("SetCredentials", "a{sv}", SD_BUS_PARAM(credentials), "", , method_set_credentials,
                                         SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_SENSITIVE));
    t.push_back(SD_BUS_SIGNAL_WITH_NAMES("Finished", "ss", SD_BUS_PARAM(state) SD_BUS_PARAM(summary), 0));
    t.push_back(SD_BUS_VTABLE_END);
    return t;
  }();
  return v.data();
}

// Length of the single complete type at the start of a D-Bus signature.
size_t complete_type(const char* s) {
  if (*s == 'a') return 1 + complete_type(s + 1);
  if (*s != '(' && *s != '{') return *s ? 1 : 0;
  size_t i = 0;
  int depth = 0;
  do {
    if (s[i] == '(' || s[i] == '{') ++depth;
    else if (s[i] == ')' || s[i] == '}') --depth;
    ++i;
  } while (s[i] && depth > 0);
  return i;
}

// What each method takes, from the vtables: signature and "type name, ..." for
// the argument check below.
std::map<std::string, std::pair<std::string, std::string>> signatures() {
  std::map<std::string, std::pair<std::string, std::string>> out;
  auto add = [&](const char* iface, const sd_bus_vtable* v) {
    for (; v->type != _SD_BUS_VTABLE_END; ++v) {
      if (v->type != _SD_BUS_VTABLE_METHOD) continue;
      const char* sig = v->x.method.signature;
      const char* name = v->x.method.names;  // in-args' names, NUL-separated (may be absent)
      std::string args;
      for (const char* p = sig; *p;) {
        size_t n = complete_type(p);
        args += fmt::format("{}{} {}", args.empty() ? "" : ", ", std::string(p, n), name && *name ? name : "arg");
        if (name && *name) name += std::strlen(name) + 1;
        p += n;
      }
      out[std::string(iface) + "." + v->x.method.member] = {sig, args};
    }
  };
  add("org.xferd.Manager1", manager_vtable);
  add("org.xferd.Job1", job_vtable());
  return out;
}

// Wrong argument types get the project's error, naming what the method takes.
int check_arguments(sd_bus_message* m, void*, sd_bus_error*) {
  static const auto sigs = signatures();
  if (!sd_bus_message_is_method_call(m, nullptr, nullptr)) return 0;
  const char* iface = sd_bus_message_get_interface(m);
  const char* member = sd_bus_message_get_member(m);
  if (!iface || !member || std::strncmp(iface, "org.xferd.", 10) != 0) return 0;
  auto it = sigs.find(std::string(iface) + "." + member);
  if (it == sigs.end()) return 0;  // sd-bus answers UnknownMethod
  const char* got = sd_bus_message_get_signature(m, true);
  if (got && it->second.first == got) return 0;
  log::info("refused {} from {}: arguments '{}', expected '{}'", member, sd_bus_message_get_sender(m) ?: "?", got ?: "",
            it->second.first);
  sd_bus_reply_method_errorf(m, err::kInvalidArguments, "%s takes (%s), signature '%s'; it was given '%s'", member,
                             it->second.second.c_str(), it->second.first.c_str(), got ? got : "");
  return 1;
}

int find_job(sd_bus* bus, const char* path, const char*, void* ud, void** found, sd_bus_error* e) {
  Service& s = svc(ud);
  std::string p = path, prefix = std::string(kJobPrefix) + "/";
  if (p.compare(0, prefix.size(), prefix) != 0) return 0;
  std::string id = p.substr(prefix.size());
  if (id.empty() || id.size() > 19 || id.find_first_not_of("0123456789") != std::string::npos) return 0;
  auto it = s.jobs.find(std::stoull(id));
  if (it != s.jobs.end()) {
    // A call on this job from another user is answered as for a job that
    // does not exist (its destination, progress and summary are the owner's
    // business, and so is its existence: ids cannot be enumerated). Signals
    // and the daemon's own emissions go on as usual.
    sd_bus_message* m = sd_bus_get_current_message(bus);
    Caller c;
    if (m && sd_bus_message_is_method_call(m, nullptr, nullptr) && sd_bus_message_get_path(m) &&
        std::strcmp(sd_bus_message_get_path(m), path) == 0 && caller_of(m, &c) >= 0 && !c.root() &&
        c.uid != it->second->row.uid)
      it = s.jobs.end();
    else if (m && sd_bus_message_is_method_call(m, nullptr, nullptr))
      it->second->watch(sd_bus_message_get_sender(m));  // its owner (or root) follows it: signals go there too
  }
  if (it == s.jobs.end())
    return sd_bus_error_setf(e, err::kNoSuchJob,
                             "there is no job %s (finished jobs are kept for keep_finished_days; xferctl list and "
                             "xferctl history show the jobs there are)",
                             id.c_str());
  *found = it->second.get();
  return 1;
}

int enumerate_jobs(sd_bus* bus, const char*, void* ud, char*** nodes, sd_bus_error*) {
  Service& s = svc(ud);
  char** out = static_cast<char**>(calloc(s.jobs.size() + 1, sizeof(char*)));
  if (!out) return -ENOMEM;
  // Introspection lists the caller's own jobs (root: all), as ListJobs does.
  sd_bus_message* m = sd_bus_get_current_message(bus);
  Caller c;
  bool all = !m || caller_of(m, &c) < 0 || c.root();
  size_t i = 0;
  for (const auto& [id, j] : s.jobs)
    if (all || j->row.uid == c.uid) out[i++] = strdup(j->path().c_str());
  *nodes = out;
  return 0;
}

// A signal about job j, sent to each of its watchers alone (the message's
// destination set: the bus delivers it to that connection only, whatever
// match rules others hold). fill appends the arguments.
template <class F>
void unicast(sd_bus* bus, const JobRecord& j, const char* iface, const char* member, F&& fill) {
  for (const std::string& to : j.watchers) {
    sd_bus_message* m = nullptr;
    int r = sd_bus_message_new_signal(bus, &m, j.path().c_str(), iface, member);
    if (r >= 0) r = sd_bus_message_set_destination(m, to.c_str());
    if (r >= 0) r = fill(m);
    if (r >= 0) r = sd_bus_send(bus, m, nullptr);
    sd_bus_message_unref(m);
    if (r < 0) log::debug("job {}: {} to {}: {}", j.row.id, member, to, strerror(-r));
  }
}

}  // namespace

int bus_register(Service& s, sd_bus* bus) {
  int r = sd_bus_add_filter(bus, nullptr, check_arguments, &s);
  if (r >= 0) r = sd_bus_add_object_vtable(bus, nullptr, kManagerPath, "org.xferd.Manager1", manager_vtable, &s);
  if (r >= 0) r = sd_bus_add_fallback_vtable(bus, nullptr, kJobPrefix, "org.xferd.Job1", job_vtable(), find_job, &s);
  if (r >= 0) r = sd_bus_add_node_enumerator(bus, nullptr, kJobPrefix, enumerate_jobs, &s);
  if (r < 0) return r;
  s.bus = bus;
  // What each job's PropertiesChanged announced last: a signal names only
  // what changed since. Kept until the job's Finished signal.
  auto shown = std::make_shared<std::map<uint64_t, std::map<std::string, PropValue>>>();
  s.on_changed = [bus, shown](JobRecord& j) {
    std::map<std::string, PropValue>& last = (*shown)[j.row.id];
    std::vector<std::pair<const char*, const JobProperty*>> changed;
    xfer::JobProgress p = j.live_progress();
    for (const JobProperty& prop : kJobProperties) {
      if (!prop.changes) continue;
      PropValue v = prop.value(j, p);
      auto it = last.find(prop.name);
      if (it != last.end() && it->second == v) continue;
      last[prop.name] = std::move(v);
      changed.emplace_back(prop.name, &prop);
    }
    if (changed.empty()) return;
    // PropertiesChanged with the new values, to each watcher alone.
    unicast(bus, j, "org.freedesktop.DBus.Properties", "PropertiesChanged", [&](sd_bus_message* m) {
      int rc = sd_bus_message_append(m, "s", "org.xferd.Job1");
      if (rc >= 0) rc = sd_bus_message_open_container(m, 'a', "{sv}");
      for (const auto& [name, prop] : changed) {
        if (rc >= 0) rc = sd_bus_message_open_container(m, 'e', "sv");
        if (rc >= 0) rc = sd_bus_message_append(m, "s", name);
        if (rc >= 0) rc = sd_bus_message_open_container(m, 'v', prop->type);
        if (rc >= 0) rc = append_value(m, last[name]);
        if (rc >= 0) rc = sd_bus_message_close_container(m);
        if (rc >= 0) rc = sd_bus_message_close_container(m);
      }
      if (rc >= 0) rc = sd_bus_message_close_container(m);
      if (rc >= 0) rc = sd_bus_message_append(m, "as", 0);
      return rc;
    });
  };
  s.on_finished = [bus, shown](JobRecord& j) {
    unicast(bus, j, "org.xferd.Job1", "Finished", [&](sd_bus_message* m) {
      return sd_bus_message_append(m, "ss", xfer::to_string(j.state), j.summary.c_str());
    });
    shown->erase(j.row.id);
  };
  return 0;
}

}  // namespace xferd
