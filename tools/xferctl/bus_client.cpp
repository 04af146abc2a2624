#include "bus_client.h"

#include "xfer/text.h"

namespace xferctl {

nlohmann::json properties(Bus& bus, const std::string& path, const char* iface) {
  Msg reply = own(bus.call(path.c_str(), "org.freedesktop.DBus.Properties", "GetAll",
                           [iface](sd_bus_message* m) { return sd_bus_message_append(m, "s", iface); }));
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

}  // namespace xferctl
