// A test link: xfer-linkemu between a client and a server namespace, nginx
// serving a dataset in the server namespace; xferctl run in the client's.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "fixture.h"

namespace xtest {

// A link with nginx in its server namespace, torn down on destruction.
struct Link {
  Link(const std::string& name, int index, const std::string& args, const Dataset& d) : name(name), index(index) {
    work = make_temp_dir("flowlink");
    // A run of this test that was killed (ctest's timeout) left its
    // namespaces: they go first, or `up` refuses and this run fails too.
    sh(bin("xfer-linkemu") + " cleanup --name " + name + " > /dev/null 2>&1");
    pid = start_link("--name " + name + " --index " + std::to_string(index) + " " + args, work + "/link.out");
    server_ip = "10.201." + std::to_string(index) + ".2";
    nginx_ok = sh("ip netns exec xfer-" + name + "-s bash " + std::string(XFER_SOURCE_DIR) + "/scripts/nginx-serve.sh start " +
                  work + "/nginx " + d.dir + " 8080 8081 2m " + server_ip + " > /dev/null") == 0;
  }
  ~Link() {
    sh("bash " + std::string(XFER_SOURCE_DIR) + "/scripts/nginx-serve.sh stop " + work + "/nginx");
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
    std::filesystem::remove_all(work);
  }
  // xferctl run in the client namespace; its --json result.
  nlohmann::json run(const std::string& manifest_text, const std::string& args) {
    std::ofstream(work + "/m.txt") << manifest_text;
    std::filesystem::create_directories(work + "/dest");
    int rc = sh("ip netns exec xfer-" + name + "-c " + bin("xferctl") + " run --manifest " + work + "/m.txt --dest " + work +
                "/dest --json --no-progress " + args + " > " + work + "/out.json 2> " + work + "/err.txt");
    EXPECT_EQ(rc, 0) << "see " << work << "/err.txt";
    std::ifstream in(work + "/out.json");
    return nlohmann::json::parse(in, nullptr, false);
  }
  std::string name, work, server_ip;
  int index;
  pid_t pid = -1;
  bool nginx_ok = false;
};

}  // namespace xtest
