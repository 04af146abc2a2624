# The parsers' sources and their library (fuzz_parsers_library), shared by
# the libFuzzer tree (tests/fuzz/CMakeLists.txt) and the ordinary build's
# seed replays (tests/CMakeLists.txt), so that a source a parser comes to need
# fails the ordinary build at once, not only the fuzz tree in CI.
#
# The targets link only the sources the seven parsers reach: the members the
# linker took from libxfer and libxferd_core (`-Wl,-Map`), 33 of 62 files.
# Building both libraries whole under three sanitizers was the suite's
# longest step (389 s of mostly one core). A source that a parser comes to
# need shows up here as an undefined symbol at link time.
set(fuzz_sources
  libxfer/util/ranges.cpp libxfer/util/safe_open.cpp libxfer/util/sha256.cpp libxfer/util/sysfs.cpp
  libxfer/util/text.cpp libxfer/util/nesting.cpp libxfer/util/boot.cpp libxfer/util/proc_stat.cpp
  libxfer/cpu/journal.cpp
  libxfer/dataset/manifest.cpp libxfer/dataset/partition.cpp
  libxfer/engine/part_file.cpp libxfer/engine/progress_record.cpp libxfer/engine/group_commit.cpp
  libxfer/engine/write_backend.cpp
  libxfer/energy/model_meter.cpp
  libxfer/control/options.cpp libxfer/cpu/kernel_knobs.cpp libxfer/control/arbiter.cpp libxfer/control/bw_schedule.cpp
  libxfer/tune/registry.cpp libxfer/tune/common.cpp libxfer/tune/kernel_plan.cpp libxfer/tune/static_tuner.cpp
  libxfer/tune/min_energy.cpp libxfer/tune/max_throughput.cpp libxfer/tune/energy_efficient.cpp
  libxfer/tune/throughput_target.cpp libxfer/tune/hla_tuner.cpp
  libxfer/hla/cache.cpp libxfer/hla/predictor.cpp libxfer/hla/strata.cpp libxfer/hla/surface.cpp
  libxfer/hla/table.cpp libxfer/hla/retention.cpp
  libxfer/engine/credentials.cpp
  daemon/config.cpp daemon/submit_args.cpp protocol/credentials_args.cpp daemon/metrics_http.cpp)
set(fuzz_targets manifest progress config submit table power_model kernel_journal netrc credentials metrics_http)
list(TRANSFORM fuzz_sources PREPEND ${PROJECT_SOURCE_DIR}/)

function(fuzz_parsers_library name)
  add_library(${name} STATIC ${fuzz_sources})
  # The same include paths, definitions and libraries as the two libraries
  # (libxfer's third-party libraries are its lowest folder's, xfer_util).
  get_target_property(xfer_libs xfer_util LINK_LIBRARIES)
  get_target_property(core_libs xferd_core LINK_LIBRARIES)
  set(fuzz_libs ${xfer_libs} ${core_libs})
  list(REMOVE_ITEM fuzz_libs xfer xferd_protocol flowmon_headers)
  list(REMOVE_DUPLICATES fuzz_libs)
  target_link_libraries(${name} PUBLIC ${fuzz_libs})
  target_include_directories(${name}
    PUBLIC ${PROJECT_SOURCE_DIR}/libxfer/include ${PROJECT_SOURCE_DIR}/daemon ${PROJECT_SOURCE_DIR}/protocol
    PRIVATE ${PROJECT_SOURCE_DIR}/libxfer/engine ${PROJECT_SOURCE_DIR}/libxfer/tune)
  target_compile_definitions(${name} PUBLIC $<TARGET_PROPERTY:xferd_core,INTERFACE_COMPILE_DEFINITIONS>)
endfunction()

