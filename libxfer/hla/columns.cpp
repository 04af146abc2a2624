#include "columns.h"

#include <fmt/format.h>

#include <cstdlib>

namespace xfer::hla {

namespace {

// Member <-> Value, one overload per member type.
Value to_value(int64_t v) { return v; }
Value to_value(double v) { return v; }
Value to_value(bool v) { return int64_t(v ? 1 : 0); }
Value to_value(const std::string& v) { return v; }
template <class T>
Value to_value(const std::optional<T>& v) {
  return v ? to_value(*v) : Value{};
}

double as_double(const Value& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return double(*i);
  if (auto* d = std::get_if<double>(&v)) return *d;
  return 0;
}
int64_t as_int(const Value& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* d = std::get_if<double>(&v)) return int64_t(*d);
  return 0;
}
void from_value(const Value& v, int64_t& m) { m = as_int(v); }
void from_value(const Value& v, double& m) { m = as_double(v); }
void from_value(const Value& v, bool& m) { m = as_int(v) != 0; }
void from_value(const Value& v, std::string& m) {
  auto* s = std::get_if<std::string>(&v);
  m = s ? *s : "";
}
void from_value(const Value& v, std::optional<double>& m) {
  m = std::holds_alternative<std::monostate>(v) ? std::nullopt : std::optional<double>(as_double(v));
}
void from_value(const Value& v, std::optional<int64_t>& m) {
  m = std::holds_alternative<std::monostate>(v) ? std::nullopt : std::optional<int64_t>(as_int(v));
}

template <class T> struct Traits;
template <> struct Traits<int64_t> { static constexpr SqlType type = SqlType::Integer; static constexpr bool nullable = false; };
template <> struct Traits<bool> { static constexpr SqlType type = SqlType::Integer; static constexpr bool nullable = false; };
template <> struct Traits<double> { static constexpr SqlType type = SqlType::Real; static constexpr bool nullable = false; };
template <> struct Traits<std::string> { static constexpr SqlType type = SqlType::Text; static constexpr bool nullable = false; };
template <class T> struct Traits<std::optional<T>> {
  static constexpr SqlType type = Traits<T>::type;
  static constexpr bool nullable = true;
};

template <class Row, class T>
Column<Row> col(const char* name, T Row::*m, bool key = false) {
  return {name, Traits<T>::type, Traits<T>::nullable, key, [m](const Row& r) { return to_value(r.*m); },
          [m](Row& r, const Value& v) { from_value(v, r.*m); }};
}

const char* sql_type(SqlType t) {
  switch (t) {
    case SqlType::Integer: return "BIGINT";
    case SqlType::Real: return "DOUBLE PRECISION";
    case SqlType::Text: return "TEXT";
  }
  return "TEXT";
}

template <class Row>
std::string create(const char* table, const std::vector<Column<Row>>& cols, bool journal) {
  std::string s = fmt::format("CREATE TABLE IF NOT EXISTS {}(", table), key;
  for (const auto& c : cols) {
    s += fmt::format("{} {}{}, ", c.name, sql_type(c.type), c.nullable ? "" : " NOT NULL");
    if (c.key) key += (key.empty() ? "" : ",") + std::string(c.name);
  }
  if (journal) s += "rev BIGINT NOT NULL DEFAULT 1, shipped_rev BIGINT NOT NULL DEFAULT 0, ";
  return s + "PRIMARY KEY(" + key + "));";
}

template <class Row>
std::string names(const std::vector<Column<Row>>& cols) {
  std::string s;
  for (const auto& c : cols) s += (s.empty() ? "" : ",") + std::string(c.name);
  return s;
}

template <class Row>
std::string insert(const char* table, const std::vector<Column<Row>>& cols, const std::function<std::string(int)>& ph) {
  std::string v;
  for (size_t i = 0; i < cols.size(); ++i) v += (i ? "," : "") + ph(int(i) + 1);
  return fmt::format("INSERT INTO {}({}) VALUES({})", table, names(cols), v);
}

// An insert that, on a key already there, replaces every other column.
template <class Row>
std::string upsert(const char* table, const std::vector<Column<Row>>& cols, const std::function<std::string(int)>& ph) {
  std::string s = insert(table, cols, ph) + " ON CONFLICT(", set;
  for (const auto& c : cols) {
    if (c.key) s += (s.back() == '(' ? "" : ",") + std::string(c.name);
    else set += fmt::format("{}{}=excluded.{}", set.empty() ? "" : ",", c.name, c.name);
  }
  return s + ") DO UPDATE SET " + set;
}

}  // namespace

const std::vector<Column<RunRow>>& run_columns() {
  using R = RunRow;
  static const std::vector<Column<R>> c = {
      col("node", &R::node, true), col("run", &R::run, true), col("tool", &R::tool), col("job_id", &R::job_id),
      col("policy", &R::policy), col("algorithm", &R::algorithm), col("label", &R::label),
      col("source_origin", &R::source_origin), col("dest_host", &R::dest_host), col("link_mbps", &R::link_mbps),
      col("link_source", &R::link_source), col("handshake_rtt_ms", &R::handshake_rtt_ms),
      col("loss_pct", &R::loss_pct), col("files", &R::files), col("bytes", &R::bytes),
      col("size_mean", &R::size_mean), col("size_sd", &R::size_sd), col("cores_present", &R::cores_present),
      col("freq_levels", &R::freq_levels), col("started_unix", &R::started_unix),
      col("finished_unix", &R::finished_unix), col("outcome", &R::outcome),
  };
  return c;
}

const std::vector<Column<IntervalRow>>& interval_columns() {
  using R = IntervalRow;
  static const std::vector<Column<R>> c = {
      col("node", &R::node, true), col("run", &R::run, true), col("seq", &R::seq, true),
      col("chunk", &R::chunk, true), col("t_unix", &R::t_unix), col("t_s", &R::t_s),
      col("interval_s", &R::interval_s), col("settling", &R::settling), col("chunk_kind", &R::chunk_kind),
      col("throughput_bps", &R::throughput_bps), col("job_throughput_bps", &R::job_throughput_bps),
      col("bytes_interval", &R::bytes_interval), col("joules", &R::joules),
      col("dynamic_joules", &R::dynamic_joules), col("job_joules", &R::job_joules),
      col("energy_source", &R::energy_source), col("rtt_ms", &R::rtt_ms), col("delta_rtt_ms", &R::delta_rtt_ms),
      col("retrans_per_mb", &R::retrans_per_mb), col("flows", &R::flows), col("ext_load", &R::ext_load),
      col("cpu_pct", &R::cpu_pct), col("cores", &R::cores), col("freq_khz", &R::freq_khz), col("cc", &R::cc),
      col("p", &R::p), col("pp", &R::pp), col("chunk_files", &R::chunk_files),
      col("chunk_bytes", &R::chunk_bytes), col("chunk_size_mean", &R::chunk_size_mean),
      col("chunk_size_sd", &R::chunk_size_sd), col("reason", &R::reason),
  };
  return c;
}

const std::vector<Column<FoldedRow>>& folded_columns() {
  using R = FoldedRow;
  static const std::vector<Column<R>> c = {
      col("key", &R::key, true), col("path", &R::path), col("size_class", &R::size_class),
      col("files_class", &R::files_class), col("cc", &R::cc), col("p", &R::p), col("pp", &R::pp),
      col("cores", &R::cores), col("freq_khz", &R::freq_khz), col("explored", &R::explored),
      col("seconds", &R::seconds), col("gb", &R::gb), col("mbps_sq", &R::mbps_sq), col("joules", &R::joules),
      col("gb_no_energy", &R::gb_no_energy), col("intervals", &R::intervals), col("visits", &R::visits),
      col("w_link_mbps", &R::w_link_mbps), col("w_rtt_ms", &R::w_rtt_ms), col("w_loss_pct", &R::w_loss_pct),
      col("w_files", &R::w_files), col("w_bytes", &R::w_bytes), col("w_size_mean", &R::w_size_mean),
      col("w_size_sd", &R::w_size_sd), col("w_ext_load", &R::w_ext_load), col("first_unix", &R::first_unix),
      col("last_unix", &R::last_unix), col("decayed_to", &R::decayed_to), col("half_life_days", &R::half_life_days),
  };
  return c;
}

std::string folded_schema_sql() { return create("hla_folded", folded_columns(), false); }

std::string upsert_folded_sql(const std::function<std::string(int)>& ph) {
  return upsert("hla_folded", folded_columns(), ph);
}

std::string select_folded_sql() { return "SELECT " + names(folded_columns()) + " FROM hla_folded ORDER BY key"; }

std::string schema_sql(bool journal) {
  return "CREATE TABLE IF NOT EXISTS hla_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);" +
         create("hla_runs", run_columns(), journal) + create("hla_intervals", interval_columns(), journal) +
         folded_schema_sql();
}

std::string insert_runs_sql(const std::function<std::string(int)>& ph, bool journal) {
  std::string s = upsert("hla_runs", run_columns(), ph);
  if (journal) s += ",rev=hla_runs.rev+1";
  return s;
}

std::string insert_intervals_sql(const std::function<std::string(int)>& ph) {
  return insert("hla_intervals", interval_columns(), ph) + " ON CONFLICT DO NOTHING";
}

std::string select_sql(bool runs, const std::string& where) {
  const std::string w = where.empty() ? "" : " WHERE " + where;
  return runs ? "SELECT " + names(run_columns()) + " FROM hla_runs" + w + " ORDER BY node,run"
              : "SELECT " + names(interval_columns()) + " FROM hla_intervals" + w + " ORDER BY node,run,seq,chunk";
}

Value parse_value(SqlType t, const std::string& text) {
  switch (t) {
    case SqlType::Integer: return int64_t(std::strtoll(text.c_str(), nullptr, 10));
    case SqlType::Real: return std::strtod(text.c_str(), nullptr);
    case SqlType::Text: return text;
  }
  return text;
}

std::string value_text(const Value& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) return fmt::format("{}", *d);
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  return "";
}

}  // namespace xfer::hla
