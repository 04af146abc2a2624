# Every dependency of the design, found from Debian's packages
# (scripts/setup.sh installs them). Some are used only by later parts of the
# design (BPF, kernel layer, HLA, daemon); finding them here proves the
# toolchain on a fresh machine.
find_package(PkgConfig REQUIRED)

pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl>=7.85)   # *_PROTOCOLS_STR
pkg_check_modules(NGHTTP2 REQUIRED IMPORTED_TARGET libnghttp2)
pkg_check_modules(LIBBPF REQUIRED IMPORTED_TARGET libbpf>=1.0)
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd>=247)  # sd_event_add_time_relative
pkg_check_modules(CRYPTO REQUIRED IMPORTED_TARGET libcrypto)
pkg_check_modules(SQLITE REQUIRED IMPORTED_TARGET sqlite3)
pkg_check_modules(PQ REQUIRED IMPORTED_TARGET libpq)  # the fleet's history (PostgreSQL)
pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing)  # direct writes (part_file.cpp)
pkg_check_modules(NCURSES REQUIRED IMPORTED_TARGET ncursesw)  # xferctl top
if(XFER_FAULTS)
  pkg_check_modules(FIU REQUIRED IMPORTED_TARGET libfiu)  # fault points (xfer/faults.h): Debian libfiu-dev
endif()

find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(tomlplusplus REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(Powercap REQUIRED)
find_package(ALGLIB REQUIRED)
find_package(GTest REQUIRED)
find_package(Threads REQUIRED)

# libcpupower ships no pkg-config or CMake file.
find_path(CPUPOWER_INCLUDE_DIR cpufreq.h REQUIRED)
find_library(CPUPOWER_LIBRARY cpupower REQUIRED)
add_library(cpupower::cpupower UNKNOWN IMPORTED)
set_target_properties(cpupower::cpupower PROPERTIES
  IMPORTED_LOCATION ${CPUPOWER_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${CPUPOWER_INCLUDE_DIR})

add_library(alglib::alglib UNKNOWN IMPORTED)
set_target_properties(alglib::alglib PROPERTIES
  IMPORTED_LOCATION ${ALGLIB_LIB}
  INTERFACE_INCLUDE_DIRECTORIES ${ALGLIB_INCLUDE_DIRS})

# BPF toolchain: clang -target bpf and bpftool (skeletons generated at build).
find_program(CLANG_BPF NAMES clang-14 clang REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)
# Prove it: a minimal CO-RE object must compile and bpftool must turn it into
# a skeleton header.
set(_bpf_probe ${CMAKE_BINARY_DIR}/CMakeFiles/bpf-probe)
file(MAKE_DIRECTORY ${_bpf_probe})
file(WRITE ${_bpf_probe}/probe.bpf.c [=[
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } hits SEC(".maps");
SEC("tp_btf/sched_process_exec") int probe(void *ctx) { __u32 k = 0; __u64 *v = bpf_map_lookup_elem(&hits, &k); if (v) __sync_fetch_and_add(v, 1); return 0; }
char LICENSE[] SEC("license") = "GPL";
]=])
execute_process(
  COMMAND ${CLANG_BPF} -g -O2 -target bpf -I/usr/include/x86_64-linux-gnu -c probe.bpf.c -o probe.bpf.o
  WORKING_DIRECTORY ${_bpf_probe} RESULT_VARIABLE _bpf_cc ERROR_VARIABLE _bpf_err)
if(NOT _bpf_cc EQUAL 0)
  message(FATAL_ERROR "clang cannot build BPF objects: ${_bpf_err}")
endif()
execute_process(COMMAND ${BPFTOOL} gen skeleton probe.bpf.o
  WORKING_DIRECTORY ${_bpf_probe} RESULT_VARIABLE _bpf_skel OUTPUT_VARIABLE _skel ERROR_VARIABLE _bpf_err)
if(NOT _bpf_skel EQUAL 0 OR NOT _skel MATCHES "probe_bpf__open")
  message(FATAL_ERROR "bpftool cannot generate a skeleton: ${_bpf_err}")
endif()
message(STATUS "BPF toolchain: ${CLANG_BPF} -target bpf and ${BPFTOOL} gen skeleton work")

# Curl must speak HTTP/2 (pp > 1 rides on h2 multiplexing).
include(CheckCSourceRuns)
set(CMAKE_REQUIRED_LIBRARIES ${CURL_LINK_LIBRARIES})
set(CMAKE_REQUIRED_INCLUDES ${CURL_INCLUDE_DIRS})
check_c_source_runs([=[
#include <curl/curl.h>
int main(void) {
  curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
  return (v->features & CURL_VERSION_HTTP2) ? 0 : 1;
}]=] XFER_CURL_HAS_HTTP2)
unset(CMAKE_REQUIRED_LIBRARIES)
unset(CMAKE_REQUIRED_INCLUDES)
if(NOT XFER_CURL_HAS_HTTP2)
  message(FATAL_ERROR "libcurl was built without HTTP/2 (nghttp2); install libcurl4-openssl-dev from Debian")
endif()
