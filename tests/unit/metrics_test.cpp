// The metrics page's format (metrics.h) and the endpoint's answers
// (metrics_server.h), without a daemon. promtool and a Prometheus server
// read the real page in tests/integration/observability_test.cpp.
#include "metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include "config.h"
#include "metrics_server.h"

using namespace xferd;
using Type = MetricSet::Type;

TEST(Metrics, FamiliesRenderInDeclarationOrderWithHelpTypeAndEscapedLabels) {
  MetricSet m;
  m.declare("xferd_b_total", Type::Counter, "B's help, with a \\ and a\nnewline.");
  m.declare("xferd_a", Type::Gauge, "A.");
  m.declare("xferd_empty", Type::Gauge, "Declared, no series yet.");
  m.add("xferd_b_total", {{"policy", "p\"1\"\n\\"}}, 3);
  m.add("xferd_b_total", {{"policy", "p\"1\"\n\\"}}, 2.5);
  m.add("xferd_b_total", {{"policy", "q"}}, -7);  // a counter never goes back
  m.set("xferd_a", {}, 42);
  m.set("xferd_undeclared", {}, 1);  // not a family: nothing
  std::string out;
  m.render(out);
  EXPECT_EQ(out,
            "# HELP xferd_b_total B's help, with a \\\\ and a\\nnewline.\n"
            "# TYPE xferd_b_total counter\n"
            "xferd_b_total{policy=\"p\\\"1\\\"\\n\\\\\"} 5.5\n"
            "# HELP xferd_a A.\n# TYPE xferd_a gauge\nxferd_a 42\n"
            "# HELP xferd_empty Declared, no series yet.\n# TYPE xferd_empty gauge\n");
  EXPECT_EQ(m.value("xferd_b_total", {{"policy", "p\"1\"\n\\"}}), 5.5);
  EXPECT_EQ(m.value("xferd_b_total", {{"policy", "q"}}), 0);
}

TEST(Metrics, AHistogramsBucketsAreCumulativeWithInfSumAndCount) {
  MetricSet m;
  m.declare("xferd_rtt_seconds", Type::Histogram, "RTT.", {0.01, 0.001, 0.1});  // sorted on declaration
  for (double v : {0.0005, 0.001, 0.05, 0.05, 3.0}) m.observe("xferd_rtt_seconds", {{"policy", "x"}}, v);
  std::string out;
  m.render(out);
  EXPECT_NE(out.find("xferd_rtt_seconds_bucket{policy=\"x\",le=\"0.001\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("xferd_rtt_seconds_bucket{policy=\"x\",le=\"0.01\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("xferd_rtt_seconds_bucket{policy=\"x\",le=\"0.1\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("xferd_rtt_seconds_bucket{policy=\"x\",le=\"+Inf\"} 5\n"), std::string::npos) << out;
  EXPECT_NE(out.find("xferd_rtt_seconds_sum{policy=\"x\"} 3.1015\n"), std::string::npos) << out;
  EXPECT_NE(out.find("xferd_rtt_seconds_count{policy=\"x\"} 5\n"), std::string::npos) << out;
  EXPECT_EQ(m.value("xferd_rtt_seconds", {{"policy", "x"}}), 5);
}

TEST(Metrics, ValuesAreWrittenAsTheFormatReadsThem) {
  EXPECT_EQ(render_value(0), "0");
  EXPECT_EQ(render_value(123456789012), "123456789012");
  EXPECT_EQ(render_value(0.25), "0.25");
  EXPECT_EQ(render_value(1.0 / 0.0), "+Inf");
  EXPECT_EQ(render_value(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(render_value(0.0 / 0.0), "NaN");
  EXPECT_EQ(render_labels({}), "");
}

TEST(MetricsHttp, OnlyGetOrHeadOfMetricsBuildsThePage) {
  int built = 0;
  auto page = [&built] {
    ++built;
    return std::string("xferd_a 1\n");
  };
  std::string ok = metrics_http_response("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*", page);
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find(std::string("Content-Type: ") + kMetricsContentType), std::string::npos);
  EXPECT_NE(ok.find("Content-Length: 10\r\n"), std::string::npos);
  EXPECT_EQ(ok.substr(ok.size() - 10), "xferd_a 1\n");
  EXPECT_EQ(built, 1);
  std::string head = metrics_http_response("HEAD /metrics?x=1 HTTP/1.0", page);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << "no body for HEAD";
  EXPECT_EQ(metrics_http_response("GET / HTTP/1.1", page).rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(metrics_http_response("POST /metrics HTTP/1.1", page).rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(metrics_http_response("garbage", page).rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(metrics_http_response("GET /metrics SMTP", page).rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(built, 2) << "the page is built for GET and HEAD of /metrics only";
}

TEST(MetricsHttp, ListenAddressesAreIpAndPortOnly) {
  sockaddr_storage sa;
  socklen_t len = 0;
  EXPECT_EQ(parse_listen_address("127.0.0.1:9807", &sa, &len), "");
  EXPECT_EQ(sa.ss_family, AF_INET);
  EXPECT_EQ(ntohs(reinterpret_cast<sockaddr_in*>(&sa)->sin_port), 9807);
  EXPECT_EQ(parse_listen_address("[::1]:9807", &sa, &len), "");
  EXPECT_EQ(sa.ss_family, AF_INET6);
  EXPECT_EQ(len, sizeof(sockaddr_in6));
  for (const char* bad : {"", "9807", "localhost:9807", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:x",
                          "[::1]9807", "::1:9807", "[::1:9807"})
    EXPECT_NE(parse_listen_address(bad, &sa, &len), "") << bad;
}

TEST(MetricsConfig, TheSectionIsCheckedAtLoad) {
  Config c = builtin_config();
  EXPECT_EQ(c.metrics_listen, "") << "no endpoint unless configured";
  EXPECT_EQ(c.metrics_textfile, "");
  apply_config_text("[metrics]\nlisten = \"127.0.0.1:9100\"\ntextfile = \"/var/lib/x/xferd.prom\"\n"
                    "textfile_interval_s = 5\n",
                    "t.conf", c);
  EXPECT_EQ(c.metrics_listen, "127.0.0.1:9100");
  EXPECT_EQ(c.metrics_textfile, "/var/lib/x/xferd.prom");
  EXPECT_EQ(c.metrics_textfile_interval_s, 5);
  for (const char* bad : {"[metrics]\nlisten = \"example.org:80\"\n", "[metrics]\nlisten = 9807\n",
                          "[metrics]\ntextfile = \"relative.prom\"\n", "[metrics]\ntextfile_interval_s = 0\n",
                          "[metrics]\nport = 1\n"}) {
    Config d = builtin_config();
    EXPECT_THROW(apply_config_text(bad, "t.conf", d), ConfigError) << bad;
  }
}
