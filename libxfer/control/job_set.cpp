#include "xfer/job_set.h"

#include <systemd/sd-event.h>

#include <chrono>
#include <memory>

#include "xfer/node.h"

namespace xfer {

nlohmann::json run_job_set(std::vector<ScheduledRun> plan, const SetOptions& o) {
  nlohmann::json result = nlohmann::json::object();
  sd_event* ev = nullptr;
  if (sd_event_new(&ev) < 0) throw std::runtime_error("sd_event_new failed");
  const auto began = std::chrono::steady_clock::now();
  {
    // The node xferd runs its jobs on: its own engine, flows, machine and arbiter.
    Node::Config nc;
    nc.arbiter.capacity_bps = o.capacity_bps;
    nc.arbiter.origin_connections = o.origin_connections;
    nc.arbitrate = o.arbiter;
    Node node(ev, nc);
    KernelLayer::Config kc;
    kc.mode = CoreControl::Mode::Affinity;
    kc.state_file = o.kernel_state;
    std::vector<std::unique_ptr<RunningJob>> jobs;
    std::vector<sd_event_source*> timers;
    int running = int(plan.size());
    for (ScheduledRun& p : plan) {
      p.spec.kernel_range = kc;
      std::string note;
      jobs.push_back(node.run(std::move(p.spec), nullptr, o.shared_kernel ? &kc : nullptr, &note));
      if (!note.empty()) result["kernel_note"] = note;
      jobs.back()->job().on_finished = [&] {
        if (--running == 0) sd_event_exit(ev, 0);
      };
      sd_event_source* t = nullptr;
      sd_event_add_time_relative(
          ev, &t, CLOCK_MONOTONIC, uint64_t(p.start_s * 1e6) + 1, 1000,
          [](sd_event_source*, uint64_t, void* ud) {
            static_cast<RunningJob*>(ud)->start();
            return 0;
          },
          jobs.back().get());
      timers.push_back(t);
    }
    sd_event_source* sampler = nullptr;
    if (o.every_50ms)
      sd_event_add_time_relative(
          ev, &sampler, CLOCK_MONOTONIC, 50000, 1000,
          [](sd_event_source* s, uint64_t, void* ud) {
            (*static_cast<const std::function<void()>*>(ud))();
            sd_event_source_set_time_relative(s, 50000);
            sd_event_source_set_enabled(s, SD_EVENT_ON);
            return 0;
          },
          const_cast<std::function<void()>*>(&o.every_50ms));
    if (!plan.empty()) sd_event_loop(ev);
    sd_event_source_unref(sampler);
    for (auto& j : jobs) result["jobs"].push_back(j->report());
    result["machine_joules"] = node.machine().joules_shared();
    result["source"] = node.energy_source();
    result["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    for (sd_event_source* t : timers) sd_event_source_unref(t);
    for (auto& j : jobs) node.retire(j);
  }
  sd_event_unref(ev);
  return result;
}

}  // namespace xfer
