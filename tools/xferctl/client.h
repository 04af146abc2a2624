// xferctl's daemon commands: submit, status, list, cancel, pause, resume,
// watch, policies, history. They talk to xferd on the system bus (or on
// DBUS_SYSTEM_BUS_ADDRESS when set).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace xferctl {

// Adds the subcommands to app; the returned function runs whichever was chosen
// (or returns -1 when none of them was).
std::function<int()> add_client_commands(CLI::App& app);

}  // namespace xferctl
