// The kernel layer the tuners turn: online cores and CPU frequency. Every
// change is journalled first, so that the machine's state is restored on
// exit, on SIGTERM/SIGINT (the caller's event loop ends, destructors run) and
// at the next start after a crash (kill -9): see KernelJournal.
#pragma once

#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xfer/params.h"
#include "xfer/sysfs.h"

namespace xfer {

// The original value of every sysfs file changed, kept in a state file
// (JSON, fsync'd before the change is made). The default lives in /run:
// after a reboot the kernel state is the boot default anyway.
class KernelJournal {
 public:
  // Takes the journal's lock (STATE_FILE.lock, flock): one process owns the
  // kernel layer at a time. Throws KernelBusy when a live process holds it;
  // otherwise restores what a dead owner left, then starts empty.
  // Only files under knob_root (the CPU knobs' sysfs directory, a fake tree's
  // root in tests) are ever journalled or written back: an entry naming any
  // other path is reported and left alone. A state file that is not a
  // journal is refused (KernelStateError) and left as it is; so is one that
  // root does not own or others can change (require_trusted).
  explicit KernelJournal(std::string state_file, std::string knob_root = "/sys/devices/system/cpu");
  ~KernelJournal();  // restores, releases the lock
  KernelJournal(const KernelJournal&) = delete;
  KernelJournal& operator=(const KernelJournal&) = delete;
  // Before writing `abs_path` the first time: remember what it holds now.
  void record(const std::string& abs_path);
  // Write every original back (two passes: some values depend on others,
  // e.g. scaling_min_freq on scaling_max_freq); remove the state file.
  // Returns the paths that could not be restored (and logs them).
  std::vector<std::string> restore();
  // A state file left by a process that died: restore it. True if there was
  // one. Throws KernelBusy when its owner is alive (it is not a leftover).
  static bool restore_leftover(const std::string& state_file, const std::string& knob_root = "/sys/devices/system/cpu");
  const std::string& state_file() const { return file_; }

 private:
  void save();
  std::string file_;
  std::string knob_root_;
  int lock_fd_ = -1;
  std::vector<std::pair<std::string, std::string>> entries_;  // path, original value
};

// A state file that is not a kernel journal xferd may act on (not one, not
// root's, or naming files outside the CPU knobs): nothing is written or removed.
struct KernelStateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A journal's text: its [path, value] entries that are knobs under root (the
// others are logged and dropped). Throws KernelStateError when the text is
// not a journal (or nests deeper than kMaxNesting).
std::vector<std::pair<std::string, std::string>> parse_kernel_journal(std::string_view text, const std::string& file,
                                                                      const std::string& root);

// Another live process owns the kernel layer (its journal's lock).
struct KernelBusy : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// How many CPUs are online. hotplug: writes cpuN/online (never cpu0, never
// below min_cores, only CPUs in `allowed`). affinity: confines only this
// process's threads to the first N allowed CPUs (sched_setaffinity), for
// hosts where hotplug is unwanted.
class CoreControl {
 public:
  enum class Mode { Hotplug, Affinity };
  struct Config {
    Mode mode = Mode::Hotplug;
    int min_cores = 1;
    std::vector<int> allowed;  // CPUs it may take offline; empty: all but cpu0
    std::string sysfs_root = "/sys/devices/system/cpu";
  };
  CoreControl(Config cfg, KernelJournal& journal);
  int present() const;       // CPUs that exist
  int online() const;        // CPUs online now (or in the affinity mask)
  std::vector<int> online_list() const;
  // Brings the count to n. Throws std::invalid_argument with the reason when
  // it cannot (below min_cores, more than exist, not allowed), IoError when
  // the kernel refuses a write.
  void set_online(int n);
  // Every thread of this process on the first n online CPUs of the mask it
  // started with (n <= 0: that mask again). Takes nothing from other
  // processes; throws std::runtime_error when the kernel refuses.
  void confine(int n);
  Mode mode() const { return cfg_.mode; }

 private:
  Config cfg_;
  KernelJournal& journal_;
  SysFs sys_;
  cpu_set_t started_with_;
};

// CPU frequency through libcpupower: the userspace governor and a fixed
// frequency where the driver has one; otherwise a cap on scaling_max_freq
// (intel_pstate). Governor and limits are journalled first.
class FreqControl {
 public:
  explicit FreqControl(KernelJournal& journal, std::string sysfs_root = "/sys/devices/system/cpu");
  bool available() const;  // a cpufreq driver is there
  std::string driver() const;
  // Hardware limits and the frequencies the driver offers (kHz).
  bool limits(unsigned cpu, unsigned long* min_khz, unsigned long* max_khz) const;
  std::vector<unsigned long> frequencies(unsigned cpu) const;
  std::vector<std::string> governors(unsigned cpu) const;
  // Sets every online CPU; returns "userspace" or "max-cap" (how it was done).
  // Throws std::runtime_error naming the CPU and file when it fails.
  std::string set_khz(unsigned long khz);

 private:
  KernelJournal& journal_;
  SysFs sys_;
};

// The kernel layer a job turns: journal, cores and frequency behind one
// door. Built at the start of a run; a state file a crashed run left is
// restored first. Everything changed is restored when it is destroyed.
// The cores other processes keep busy: the machine's busy time (/proc/stat)
// less this process's own CPU time, over wall time. Measured over 100 ms when
// made (the load before any decision), then every 500 ms on a thread of its
// own, smoothed over about 2 s.
class OthersLoad {
 public:
  explicit OthersLoad(std::string proc = "/proc");
  ~OthersLoad();
  OthersLoad(const OthersLoad&) = delete;
  OthersLoad& operator=(const OthersLoad&) = delete;
  double cores() const { return cores_.load(); }

 private:
  static constexpr int kFirstMs = 100, kEveryMs = 500;
  struct Sample {
    double wall = 0, machine_busy = 0, self = 0;  // seconds
  };
  Sample read() const;
  static double between(const Sample& a, const Sample& b);
  std::string proc_;
  std::atomic<double> cores_{0};
  Sample last_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

class KernelLayer {
 public:
  struct Config {
    CoreControl::Mode mode = CoreControl::Mode::Hotplug;
    int min_cores = 1;
    std::vector<int> allowed;
    bool freq = true;  // tune the frequency where there is a cpufreq driver
    int max_cores = 0;       // never more cores than this (0: all)
    long min_freq_khz = 0;   // frequency range the tuner may use (0: the driver's)
    long max_freq_khz = 0;
    std::string state_file;  // the journal (the front end's path)
    std::string sysfs_root = "/sys/devices/system/cpu";
    // Hotplug: the cores other processes keep busy (OthersLoad when unset;
    // tests give their own). They come on top of what the jobs ask for: a
    // core other work uses is never taken offline (unless spare_busy is
    // false: kernel.busy_cores = "taken").
    bool spare_busy = true;
    std::function<double()> others_cores;
    // Hotplug: a core goes offline only once the jobs' ask for fewer cores
    // has stood this long; until then xferd's own threads are confined to
    // the cores that will stay (affinity). Writing cpuN/online costs about
    // 8 ms of CPU and 45 ms of wall time here, and the jobs left on the one
    // core then share it with everything else, so a job of a second pays
    // more than it saves; 0: at once. The clock is steady time in seconds
    // (tests give their own).
    double offline_after_s = 2.0;
    std::function<double()> clock;
  };
  explicit KernelLayer(Config cfg);
  ~KernelLayer();
  KernelCaps caps() const;
  // 0 leaves a knob alone. Returns "" or why it could not be done (logged).
  std::string apply(int cores, long freq_khz);
  std::string apply(const Params& p) { return apply(p.cores, p.freq_khz); }
  // Hotplug: the cores asked for last, again, with what other processes use
  // now (called each interval: a load that came after the ask brings its
  // cores back online, one that left lets them go). "" or why not.
  std::string keep_up();
  // Every knob of xfer/kernel_knobs.h as it stands now (0: not set by us).
  Params in_effect() const;
  int cores() const;
  long freq_khz() const { return freq_set_; }
  const std::string& mode_name() const { return mode_; }

 private:
  Config cfg_;
  KernelJournal journal_;
  CoreControl cores_;
  FreqControl freq_;
  std::string mode_;
  long freq_set_ = 0;
  // Hotplug: the cores the jobs asked for, and those set for other work on top.
  int asked_cores_ = 0;
  int others_on_top_ = 0;
  std::unique_ptr<OthersLoad> load_;
  // Hotplug: since when fewer cores than are online have been wanted (<0: not
  // so), and the cores xferd's threads are confined to meanwhile (0: none).
  double fewer_since_ = -1;
  int confined_ = 0;
  int with_others(int cores);
  double now() const;
  // Brings the online cores toward `want` (at once up, after offline_after_s
  // down) and confines xferd's threads while a step down waits.
  void settle(int want);
};

}  // namespace xfer
