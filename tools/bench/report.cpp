#include "report.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <sstream>

namespace bench {
namespace {

std::string quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool in = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (in) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') cur += '"', ++i;
      else if (c == '"') in = false;
      else cur += c;
    } else if (c == '"') {
      in = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string xml(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

}  // namespace

std::string csv_header() {
  return "scenario,dataset,client,kind,repeat,exit_code,wall_s,bytes,files,files_ok,verified,throughput_mbps,"
         "client_cpu_s,server_cpu_s,client_j,server_j,j_per_gb,energy_source";
}

std::string csv_line(const RunRow& r) {
  return fmt::format("{},{},{},{},{},{},{:.3f},{},{},{},{},{:.2f},{:.3f},{:.3f},{:.2f},{:.2f},{:.2f},{}", quote(r.scenario),
                     quote(r.dataset), quote(r.client), quote(r.kind), r.repeat, r.exit_code, r.wall_s, r.bytes, r.files,
                     r.files_ok, r.verified ? 1 : 0, r.throughput_mbps, r.client_cpu_s, r.server_cpu_s, r.client_j,
                     r.server_j, r.j_per_gb, quote(r.energy_source));
}

std::vector<RunRow> read_csv(const std::string& path) {
  std::vector<RunRow> rows;
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    auto v = split_csv(line);
    if (v.size() < 18) continue;
    RunRow r;
    r.scenario = v[0], r.dataset = v[1], r.client = v[2], r.kind = v[3];
    r.repeat = std::stoi(v[4]), r.exit_code = std::stoi(v[5]);
    r.wall_s = std::stod(v[6]), r.bytes = std::stoull(v[7]), r.files = std::stoull(v[8]), r.files_ok = std::stoull(v[9]);
    r.verified = v[10] == "1", r.throughput_mbps = std::stod(v[11]);
    r.client_cpu_s = std::stod(v[12]), r.server_cpu_s = std::stod(v[13]);
    r.client_j = std::stod(v[14]), r.server_j = std::stod(v[15]), r.j_per_gb = std::stod(v[16]);
    r.energy_source = v[17];
    rows.push_back(r);
  }
  return rows;
}

std::vector<Summary> summarize(const std::vector<RunRow>& rows) {
  std::vector<Summary> out;
  std::map<std::pair<std::string, std::string>, std::vector<const RunRow*>> groups;
  for (const auto& r : rows) {
    auto key = std::make_pair(r.dataset, r.client);
    if (!groups.count(key)) {
      Summary s;
      s.dataset = r.dataset, s.client = r.client, s.kind = r.kind, s.peer = r.kind != "xferctl";
      out.push_back(s);
    }
    groups[key].push_back(&r);
  }
  for (auto& s : out) {
    std::vector<double> thr, wall, ccpu, scpu, cj, jpg;
    for (const RunRow* r : groups[{s.dataset, s.client}]) {
      ++s.runs;
      if (!r->verified) continue;  // a run that did not deliver every byte has no speed
      ++s.verified_runs;
      thr.push_back(r->throughput_mbps), wall.push_back(r->wall_s), ccpu.push_back(r->client_cpu_s);
      scpu.push_back(r->server_cpu_s), cj.push_back(r->client_j), jpg.push_back(r->j_per_gb);
    }
    s.throughput_mbps = median(thr), s.wall_s = median(wall), s.client_cpu_s = median(ccpu);
    s.server_cpu_s = median(scpu), s.client_j = median(cj), s.j_per_gb = median(jpg);
  }
  // Ratios against the best peer of the same dataset: highest throughput, lowest J/GB.
  for (auto& s : out) {
    double best_thr = 0, best_jpg = 0;
    for (const auto& p : out) {
      if (!p.peer || p.dataset != s.dataset || p.verified_runs == 0) continue;
      best_thr = std::max(best_thr, p.throughput_mbps);
      if (p.j_per_gb > 0) best_jpg = best_jpg == 0 ? p.j_per_gb : std::min(best_jpg, p.j_per_gb);
    }
    s.thr_vs_best_peer = best_thr > 0 ? s.throughput_mbps / best_thr : 0;
    s.jpg_vs_best_peer = best_jpg > 0 && s.j_per_gb > 0 ? s.j_per_gb / best_jpg : 0;
  }
  return out;
}

std::string markdown(const std::string& scenario, const std::vector<Summary>& ss, const std::string& energy_source) {
  std::ostringstream md;
  md << "# " << scenario << "\n\nMedians over verified runs. Energy: " << energy_source
     << ", the same model applied to every client's CPU time (client side). Ratios are against the best "
        "peer (curl, wget, aria2c) of the same dataset: throughput / best peer throughput, J/GB / best peer "
        "J/GB (below 1 is better).\n";
  std::string current;
  for (const auto& s : ss) {
    if (s.dataset != current) {
      current = s.dataset;
      md << "\n## " << current << "\n\n"
         << "| client | runs ok | Mbit/s | s | client CPU s | server CPU s | J (model) | J/GB | thr / best peer | J/GB / best peer |\n"
         << "|---|---|---|---|---|---|---|---|---|---|\n";
    }
    md << fmt::format("| {} | {}/{} | {:.1f} | {:.2f} | {:.2f} | {:.2f} | {:.1f} | {:.1f} | {:.2f} | {:.2f} |\n", s.client,
                      s.verified_runs, s.runs, s.throughput_mbps, s.wall_s, s.client_cpu_s, s.server_cpu_s, s.client_j,
                      s.j_per_gb, s.thr_vs_best_peer, s.jpg_vs_best_peer);
  }
  return md.str();
}

std::string svg_plot(const std::string& title, const std::vector<Summary>& ss) {
  const double W = 640, H = 420, L = 70, R = 180, T = 40, B = 50;
  double max_x = 0, max_y = 0;
  for (const auto& s : ss) max_x = std::max(max_x, s.j_per_gb), max_y = std::max(max_y, s.throughput_mbps);
  auto nice = [](double v) {
    if (v <= 0) return 1.0;
    double p = std::pow(10, std::floor(std::log10(v)));
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
      if (m * p >= v) return m * p;
    return 10 * p;
  };
  max_x = nice(max_x * 1.05), max_y = nice(max_y * 1.05);
  auto X = [&](double v) { return L + (W - L - R) * v / max_x; };
  auto Y = [&](double v) { return H - B - (H - T - B) * v / max_y; };
  std::ostringstream o;
  o << fmt::format(R"s(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">)s", W, H)
    << "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << fmt::format(R"s(<text x="{}" y="22" font-size="15" font-weight="bold">{}</text>)s", L, xml(title)) << "\n";
  for (int i = 0; i <= 5; ++i) {
    double xv = max_x * i / 5, yv = max_y * i / 5;
    o << fmt::format(R"s(<line x1="{:.1f}" y1="{}" x2="{:.1f}" y2="{}" stroke="#ddd"/>)s", X(xv), T, X(xv), H - B) << "\n"
      << fmt::format(R"s(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="#ddd"/>)s", L, Y(yv), W - R, Y(yv)) << "\n"
      << fmt::format(R"s(<text x="{:.1f}" y="{}" text-anchor="middle">{:g}</text>)s", X(xv), H - B + 16, xv) << "\n"
      << fmt::format(R"s(<text x="{}" y="{:.1f}" text-anchor="end">{:g}</text>)s", L - 6, Y(yv) + 4, yv) << "\n";
  }
  o << fmt::format(R"s(<text x="{}" y="{}" text-anchor="middle">energy, J/GB (model, client)</text>)s", (L + W - R) / 2, H - 12) << "\n"
    << fmt::format(R"s(<text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">throughput, Mbit/s</text>)s",
                   (T + H - B) / 2, (T + H - B) / 2)
    << "\n";
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
  int i = 0;
  for (const auto& pt : ss) {
    const char* c = colors[i % 10];
    double x = X(pt.j_per_gb), y = Y(pt.throughput_mbps);
    if (pt.peer)
      o << fmt::format(R"s(<circle cx="{:.1f}" cy="{:.1f}" r="6" fill="{}"/>)s", x, y, c) << "\n";
    else
      o << fmt::format(R"s(<rect x="{:.1f}" y="{:.1f}" width="12" height="12" fill="{}"/>)s", x - 6, y - 6, c) << "\n";
    o << fmt::format(R"s(<text x="{}" y="{}" fill="{}">{} {}</text>)s", W - R + 12, T + 16 + 18 * i, c, pt.peer ? "●" : "■",
                     xml(pt.client))
      << "\n";
    ++i;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace bench
