// The history's two tables as column lists (history.h has the schema in
// words): one description serves the SQL of both backends, their binding
// and their reading, so a column is added in one place.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "xfer/history.h"

namespace xfer::hla {

// A cell: NULL, an integer, a number or text.
using Value = std::variant<std::monostate, int64_t, double, std::string>;

enum class SqlType { Integer, Real, Text };

template <class Row>
struct Column {
  const char* name;
  SqlType type;
  bool nullable;
  bool key;
  std::function<Value(const Row&)> get;
  std::function<void(Row&, const Value&)> set;
};

const std::vector<Column<RunRow>>& run_columns();
const std::vector<Column<IntervalRow>>& interval_columns();
const std::vector<Column<FoldedRow>>& folded_columns();

// CREATE TABLE statements (IF NOT EXISTS) for both tables and hla_meta.
// journal: the SQLite journal's extra columns (rev, shipped_rev).
std::string schema_sql(bool journal);

// "INSERT INTO t(cols) VALUES(ph...) ON CONFLICT DO NOTHING" for intervals;
// for runs an upsert that replaces every column (and, in a journal, marks
// the row to ship again). ph(i) spells placeholder i (1-based).
std::string insert_runs_sql(const std::function<std::string(int)>& ph, bool journal);
std::string insert_intervals_sql(const std::function<std::string(int)>& ph);
// "SELECT cols FROM t [WHERE where]" (ORDER BY its key).
std::string select_sql(bool runs, const std::string& where = "");
// hla_folded: CREATE TABLE (in schema_sql too), an upsert that replaces
// every column, and its SELECT.
std::string folded_schema_sql();
std::string upsert_folded_sql(const std::function<std::string(int)>& ph);
std::string select_folded_sql();

// Parses text (PostgreSQL's text format) as the column's type.
Value parse_value(SqlType t, const std::string& text);
// A value as text for PostgreSQL's text format (numbers round-trip exactly).
std::string value_text(const Value& v);

}  // namespace xfer::hla
