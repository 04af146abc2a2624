// xferctl's daemon commands: submit, status, list, cancel, pause, resume,
// watch, policies, history. They talk to xferd on the system bus (or on
// DBUS_SYSTEM_BUS_ADDRESS when set).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "xfer/options.h"

namespace xferctl {

// Adds the subcommands to app; the returned function runs whichever was chosen
// (or returns -1 when none of them was).
std::function<int()> add_client_commands(CLI::App& app);

// One flag per option of xfer::option_table() open to scope, read and
// checked by the table (the words the config and D-Bus use); each value given
// lands in `into`, which must outlive the parse. shown_defaults: the defaults
// to name in the help (null: none named).
void add_table_flags(CLI::App* cmd, xfer::OptionScope scope, xfer::OptionValues& into,
                     const xfer::OptionValues* shown_defaults = nullptr);

}  // namespace xferctl
