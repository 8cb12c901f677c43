#include "model/case_file.h"
#include "model/launch_kinds.h"
#include "model/request_arrays.h"

#include "model/errors.h"
#include "model/json_field.h"
#include "model/metadata.h"
#include "model/npy.h"
#include "model/output_file.h"

#include <nlohmann/json.hpp>

#include <array>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace mc::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr std::size_t kJsonListMax = std::size_t{1} << 24; // entries of any list read

// ---------------------------------------------------------------------------------------
// Per-request arrays: their file names and lengths (launch.h, LAUNCH_KINDS.md "Indexing").

using ArrayField = RequestArrayField;
constexpr const auto& kArrayFields = kRequestArrays;

std::string_view to_string(StateKind kind) {
  return kind == StateKind::conv ? "conv" : "temporal";
}
std::string_view to_string(LaunchStatus status) {
  return status == LaunchStatus::ok ? "ok" : "unsupported";
}

fs::path arena_file(const fs::path& dir, std::size_t i) {
  return dir / fmt::format("arena_{}.npy", i);
}
fs::path table_file(const fs::path& dir, std::size_t g) {
  return dir / fmt::format("{}.npy", block_table_array_name(g));
}
fs::path array_file(const fs::path& dir, std::string_view name) {
  return dir / fmt::format("{}.npy", name);
}

// ---------------------------------------------------------------------------------------
// Writing.

json tensor_json(const StateTensor& t) {
  return {{"group", t.group},
          {"layer", t.layer},
          {"state", t.state},
          {"name", t.shape.name},
          {"kind", to_string(t.kind())},
          {"conv_layout", to_string(t.conv_layout)},
          {"dims", t.shape.dims},
          {"conv_dim", t.shape.conv_dim},
          {"conv_state_len", t.shape.conv_state_len},
          {"elem_size", t.elem_size},
          {"natural_bytes", t.natural_bytes},
          {"arena", t.arena},
          {"offset_bytes", t.offset_bytes},
          {"block_stride_bytes", t.block_stride_bytes}};
}

json meta_json(const StateMeta& m, std::int32_t arena) {
  return {{"arena", arena},
          {"base_addr", m.base_addr},
          {"block_stride_bytes", m.block_stride_bytes},
          {"inner_size", m.inner_size},
          {"ds_row_stride_bytes", m.ds_row_stride_bytes},
          {"elem_size", m.elem_size},
          {"conv_width", m.conv_width},
          {"group_index", m.group_index},
          {"ds_row_count", m.ds_row_count}};
}

json arena_json(const ArenaSpec& a) {
  return {{"page_bytes", a.page_bytes}, {"num_blocks", a.num_blocks}};
}

json layout_json(const Layout& layout) {
  json groups = json::array();
  for (const GroupSpec& g : layout.spec.groups)
    groups.push_back(group_json(g, ZeroParams::written));
  json tensors = json::array();
  for (const StateTensor& t : layout.tensors)
    tensors.push_back(tensor_json(t));
  json arenas = json::array();
  for (const ArenaSpec& a : layout.arenas)
    arenas.push_back(arena_json(a));
  return {{"num_blocks", layout.spec.num_blocks},
          {"groups", groups},
          {"tensors", tensors},
          {"arenas", arenas}};
}

// The flattened metadata with every arena at address 0: base_addr is the offset of block
// 0 of the state within its arena.
json metadata_json(const Layout& layout) {
  const std::vector<std::uint64_t> zeros(layout.arenas.size(), 0);
  const std::vector<StateMeta> metas = flatten_metadata(layout, zeros);
  json out = json::array();
  for (std::size_t i = 0; i < metas.size(); ++i)
    out.push_back(meta_json(metas[i], layout.tensors[i].arena));
  return out;
}

json decision_json(const CopyDecision& d) {
  return {{"batch_row", d.batch_row},
          {"slot", d.slot},
          {"tensor", d.tensor},
          {"group", d.group},
          {"layer", d.layer},
          {"state", d.state},
          {"src_col", d.src_col},
          {"dst_col", d.dst_col},
          {"token_bias", d.token_bias},
          {"src_block_id", d.src_block_id},
          {"dst_block_id", d.dst_block_id},
          {"src_byte_offset", d.src_byte_offset},
          {"bytes", d.bytes}};
}

void write_json(const fs::path& file, const json& value) {
  // Invalid UTF-8 (in a group name or a reason) is replaced, never a throw while saving.
  write_whole_file(file, value.dump(1, ' ', false, json::error_handler_t::replace) + '\n');
}

void create_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail_input("{}: cannot create directory: {}", dir.string(), ec.message());
}

// Writes every non-empty array and returns their names.
json write_arrays(const fs::path& dir, const RequestArrays& arrays) {
  json names = json::array();
  for (const ArrayField& f : kArrayFields) {
    const std::vector<std::int32_t>& values = arrays.*f.member;
    if (values.empty()) continue;
    const std::array<std::int64_t, 1> shape = {static_cast<std::int64_t>(values.size())};
    write_npy<std::int32_t>(array_file(dir, f.name), shape, values);
    names.push_back(f.name);
  }
  return names;
}

void write_arenas(const fs::path& dir, const Layout& layout, const std::vector<Arena>& arenas) {
  for (std::size_t i = 0; i < arenas.size(); ++i) {
    const ArenaSpec& spec = layout.arenas[i];
    const std::array<std::int64_t, 2> shape = {spec.num_blocks, spec.page_bytes};
    write_npy(arena_file(dir, i), NpyDtype::uint8, shape, arenas[i].bytes());
  }
}

void assert_arrays_fit(const RequestArrays& arrays, std::int32_t num_reqs, std::int32_t num_slots) {
  for (const ArrayField& f : kArrayFields) {
    const std::vector<std::int32_t>& values = arrays.*f.member;
    MC_ASSERT(values.empty() || static_cast<std::int64_t>(values.size()) ==
                                    array_length(f.indexing, num_reqs, num_slots));
  }
}

void assert_well_formed(const LaunchCase& c) {
  MC_ASSERT(c.arenas.size() == c.layout.arenas.size());
  for (std::size_t i = 0; i < c.arenas.size(); ++i)
    MC_ASSERT(c.arenas[i].size_bytes() == c.layout.arenas[i].size_bytes());
  MC_ASSERT(c.block_tables.groups.size() == c.layout.spec.groups.size());
  const BlockTable& first = c.block_tables.groups.front();
  for (const BlockTable& t : c.block_tables.groups) {
    MC_ASSERT(t.num_rows == first.num_rows);
    MC_ASSERT(t.row_width == first.row_width);
    MC_ASSERT(t.row_stride == first.row_stride);
    MC_ASSERT(t.block_ids.size() ==
              static_cast<std::size_t>(t.num_rows) * static_cast<std::size_t>(t.row_stride));
  }
  MC_ASSERT(c.num_reqs >= 0 && c.num_slots >= 0);
  assert_arrays_fit(c.requests, c.num_reqs, c.num_slots);
}

// ---------------------------------------------------------------------------------------
// Reading: Field (json_field.h) names the field path of a rejection; read_file puts the file
// in front. A rejection of the whole file (the layout its spec builds) names no field.

struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using ReadJson = nlohmann::json;

template <typename Read> auto read_file(const std::string& file_name, Read read) {
  try {
    return read();
  } catch (const FieldError& e) {
    fail_input("{}: {}: {}", file_name, e.field.empty() ? "(top level)" : e.field, e.reason);
  } catch (const FileError& e) {
    fail_input("{}: {}", file_name, e.what());
  }
}

ReadJson read_json(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) fail_input("{}: missing (not a regular file)", file.string());
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec) fail_input("{}: cannot stat: {}", file.string(), ec.message());
  if (size > static_cast<std::uintmax_t>(kCaseJsonBytesMax))
    fail_input("{}: {} bytes, at most {}", file.string(), size, kCaseJsonBytesMax);
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) fail_input("{}: cannot read", file.string());
  const ReadJson::parser_callback_t limit_depth = [&file](int depth, ReadJson::parse_event_t,
                                                          ReadJson&) -> bool {
    if (depth > kCaseJsonDepthMax)
      fail_input("{}: nested deeper than {} levels", file.string(), kCaseJsonDepthMax);
    return true;
  };
  return read_file(file.string(),
                   [&] { return parse_json_text(text.str(), JsonText::file, limit_depth); });
}

// The format name and version at the top of case.json and result.json.
void check_format(const Field& root, std::string_view name) {
  const std::string format = root["format"].string(64);
  if (format != name) root["format"].fail("'{}', expected '{}'", format, name);
  const std::int64_t version = root["version"].integer(INT32_MIN, INT32_MAX);
  if (version > kCaseFormatVersion)
    root["version"].fail("version {} is newer than this mambacheck reads ({}); update "
                         "mambacheck",
                         version, kCaseFormatVersion);
  if (version < 1) root["version"].fail("version {} is not a version (1 and up)", version);
}

CacheConfig parse_config(const Field& n) {
  return CacheConfig{
      .mamba_block_size = n["mamba_block_size"].int32(),
      .attn_block_size = n["attn_block_size"].int32(),
      .num_spec_tokens = n["num_spec_tokens"].int32(),
      .num_spec_blocks = n["num_spec_blocks"].int32(),
      .mode = n["mode"].parse_with(parse_cache_mode),
      .conv_layout = n["conv_layout"].parse_with(parse_conv_layout),
      .runner = n["runner"].parse_with(parse_runner),
      .tp_size = n["tp_size"].int32(),
  };
}

FamilyParams parse_params(const Field& n) {
  FamilyParams params;
  for (const FamilyParamField& p : kFamilyParamFields)
    params.*p.member = n[p.name].integer(0, kCaseFamilyParamMax);
  return params;
}

LayoutSpec parse_spec(const Field& n) {
  LayoutSpec spec{.num_blocks = n["num_blocks"].integer(2, kBlocksMax)};
  const Field groups = n["groups"];
  const std::size_t num_groups = groups.array_size(kGroupsMax);
  for (std::size_t i = 0; i < num_groups; ++i) {
    const Field g = groups[i];
    spec.groups.push_back(GroupSpec{
        .name = g["name"].string(256),
        .family = g["family"].parse_with(parse_family),
        .params = parse_params(g["params"]),
        .num_layers = g["num_layers"].int32(1, kLayersMax),
        .conv_elem_size = g["conv_elem_size"].int32(),
        .temporal_elem_size = g["temporal_elem_size"].int32(),
        .page_policy = g["page_policy"].parse_with(parse_page_policy),
        .page_align_bytes = g["page_align_bytes"].integer(1, kCasePageAlignMax),
    });
  }
  return spec;
}

void expect_same(const Field& n, std::int64_t rebuilt) {
  const std::int64_t stored = n.integer(INT64_MIN, INT64_MAX);
  if (stored != rebuilt)
    n.fail("{} does not match the layout rebuilt from the spec ({})", stored, rebuilt);
}

void expect_same(const Field& n, std::string_view rebuilt) {
  const std::string stored = n.string(256);
  if (stored != rebuilt)
    n.fail("'{}' does not match the layout rebuilt from the spec ('{}')", stored, rebuilt);
}

// Every field the writer above makes of what the layout rebuilt from the spec holds
// (`rebuilt`: tensor_json, meta_json, arena_json) stored the same in `n`, in the writer's order.
// The one unsigned field is metadata's base_addr.
void expect_same_fields(const Field& n, const json& rebuilt) {
  for (const auto& [key, value] : rebuilt.items()) {
    const Field stored = n[key];
    if (value.is_string()) {
      expect_same(stored, value.get<std::string>());
    } else if (value.is_number_unsigned()) {
      if (stored.uint64() != value.get<std::uint64_t>())
        stored.fail("{} does not match the layout rebuilt from the spec ({})", stored.uint64(),
                    value.get<std::uint64_t>());
    } else if (value.is_array()) { // a tensor's dims
      if (stored.array_size(kNpyRankMax) != value.size())
        stored.fail("{} dimensions, the layout rebuilt from the spec has {}",
                    stored.value().size(), value.size());
      for (std::size_t d = 0; d < value.size(); ++d)
        expect_same(stored[d], value[d].get<std::int64_t>());
    } else {
      expect_same(stored, value.get<std::int64_t>());
    }
  }
}

// Every arena together stays under kCaseArenaBytesMax (checked before any product).
void check_arena_sizes(const Field& n, const Layout& layout) {
  std::int64_t total = 0;
  for (const ArenaSpec& a : layout.arenas) {
    if (a.page_bytes > (kCaseArenaBytesMax - total) / a.num_blocks)
      n.fail("the arenas need more than {} bytes", kCaseArenaBytesMax);
    total += a.size_bytes();
  }
}

Layout parse_layout(const Field& root) {
  const CacheConfig config = parse_config(root["config"]);
  const Field n = root["layout"];
  const LayoutSpec spec = parse_spec(n);
  Layout layout;
  try {
    layout = build_layout(config, spec);
  } catch (const InputError& e) {
    // build_layout names the section and field ("config: ...", "layout: group 1 ...").
    throw FileError(e.what());
  }
  check_arena_sizes(n, layout);
  const Field tensors = n["tensors"];
  if (tensors.array_size(kJsonListMax) != layout.tensors.size())
    tensors.fail("{} tensors, the layout rebuilt from the spec has {}", tensors.value().size(),
                 layout.tensors.size());
  for (std::size_t i = 0; i < layout.tensors.size(); ++i)
    expect_same_fields(tensors[i], tensor_json(layout.tensors[i]));
  const Field arenas = n["arenas"];
  if (arenas.array_size(kJsonListMax) != layout.arenas.size())
    arenas.fail("{} arenas, the layout rebuilt from the spec has {}", arenas.value().size(),
                layout.arenas.size());
  for (std::size_t i = 0; i < layout.arenas.size(); ++i)
    expect_same_fields(arenas[i], arena_json(layout.arenas[i]));
  const Field metadata = root["metadata"];
  if (metadata.array_size(kJsonListMax) != layout.tensors.size())
    metadata.fail("{} entries, the layout has {} tensors", metadata.value().size(),
                  layout.tensors.size());
  const json rebuilt = metadata_json(layout);
  for (std::size_t i = 0; i < rebuilt.size(); ++i)
    expect_same_fields(metadata[i], rebuilt[i]);
  return layout;
}

// ---------------------------------------------------------------------------------------
// The kind's columns (launch_kinds.h), written next to its name so that a reader elsewhere (the
// Python adapter) takes them from the case instead of keeping its own table of kinds.

json kind_columns_json(LaunchKind kind) {
  const LaunchKindInfo& info = launch_kind_info(kind);
  json inputs = json::array();
  for (std::size_t i = 0; i < kArrayFields.size(); ++i)
    if (must_come_in(info.arrays[i])) inputs.push_back(kArrayFields[i].name);
  return {{"family", to_string(info.family)},
          {"phase", to_string(info.phase)},
          {"slots", info.by_slot ? "idx_mapping" : "batch_row"},
          {"table_rows", info.tables_by_slot ? "slot" : "batch_row"},
          {"moves_state", info.moves_state},
          {"work", to_string(info.work)},
          {"inputs", std::move(inputs)}};
}

// A case that carries the columns must carry this build's: one written with another table of
// kinds is refused, not read with this one's. A case without them predates them.
void check_kind_columns(const Field& launch, LaunchKind kind) {
  if (!launch.has("family")) return;
  const json want = kind_columns_json(kind);
  for (const auto& [key, value] : want.items()) {
    const Field got = launch[key];
    if (got.value().dump() != value.dump())
      got.fail("{}, but {} has {} (model/launch_kinds.h)", got.value().dump(), to_string(kind),
               value.dump());
  }
}

// ---------------------------------------------------------------------------------------
// case.json without the arrays: what both load_case and the result functions need.

struct CaseHeader {
  Layout layout;
  LaunchKind kind = LaunchKind::postprocess;
  std::int32_t num_reqs = 0;
  std::int32_t num_slots = 0;
  std::int32_t num_rows = 0;
  std::int32_t row_width = 0;
  std::int32_t row_stride = 0;
  std::vector<const ArrayField*> arrays;
};

std::vector<const ArrayField*> parse_array_names(const Field& list) {
  std::vector<const ArrayField*> out;
  const std::size_t count = list.array_size(kArrayFields.size());
  for (std::size_t i = 0; i < count; ++i) {
    const std::string name = list[i].string(64);
    const ArrayField* field = nullptr;
    for (const ArrayField& f : kArrayFields)
      if (f.name == name) field = &f;
    if (field == nullptr) {
      std::string known;
      for (const ArrayField& f : kArrayFields)
        known += fmt::format("{}{}", known.empty() ? "" : ", ", f.name);
      list[i].fail("unknown array '{}' (known: {})", name, known);
    }
    for (const ArrayField* seen : out)
      if (seen == field) list[i].fail("array '{}' is listed twice", name);
    out.push_back(field);
  }
  return out;
}

void parse_table_geometry(const Field& n, CaseHeader& h) {
  h.num_rows = n["num_rows"].int32(0, kCaseReqsMax);
  h.row_width = n["row_width"].int32(0, kCaseTableColsMax);
  h.row_stride = n["row_stride"].int32(0, kCaseTableColsMax);
  if (h.row_stride < h.row_width)
    n["row_stride"].fail("{} is less than row_width {}", h.row_stride, h.row_width);
  if (std::int64_t{h.num_rows} * h.row_stride > kCaseTableElementsMax)
    n.fail("{} x {} entries, at most {} per table", h.num_rows, h.row_stride,
           kCaseTableElementsMax);
  if (h.num_rows < h.num_reqs)
    n["num_rows"].fail("{} rows, fewer than the {} batch rows of the launch", h.num_rows,
                       h.num_reqs);
  if (tables_by_slot(h.kind) && h.num_rows < h.num_slots)
    n["num_rows"].fail("{} rows, fewer than the {} slots of the launch ({} finds a row's table "
                       "at its slot)",
                       h.num_rows, h.num_slots, to_string(h.kind));
}

void parse_launch(const Field& n, CaseHeader& h) {
  h.kind = n["kind"].parse_with(parse_launch_kind);
  h.num_reqs = n["num_reqs"].int32(0, kCaseReqsMax);
  h.num_slots = n["num_slots"].int32(0, kCaseReqsMax);
  if (!uses_idx_mapping(h.kind) && h.num_slots != h.num_reqs)
    n["num_slots"].fail("{}, but {} indexes by request row: it must equal num_reqs ({})",
                        h.num_slots, to_string(h.kind), h.num_reqs);
  parse_table_geometry(n["block_table"], h);
  const Field arrays = n["arrays"];
  h.arrays = parse_array_names(arrays);
  const auto has = [&h](std::string_view name) {
    for (const ArrayField* f : h.arrays)
      if (f->name == name) return true;
    return false;
  };
  if (!uses_idx_mapping(h.kind) && has("idx_mapping"))
    arrays.fail("{} indexes by request row and takes no idx_mapping", to_string(h.kind));
  check_kind_columns(n, h.kind);
  if (h.num_reqs == 0) return; // an empty launch reads nothing
  const LaunchKindInfo& info = launch_kind_info(h.kind);
  for (std::size_t i = 0; i < kArrayFields.size(); ++i)
    if (must_come_in(info.arrays[i]) && !has(kArrayFields[i].name))
      arrays.fail("{} needs '{}'", to_string(h.kind), kArrayFields[i].name);
}

CaseHeader read_case_header(const fs::path& dir) {
  const fs::path file = dir / "case.json";
  const ReadJson doc = read_json(file);
  return read_file(file.string(), [&] {
    const Field root(doc);
    check_format(root, kCaseFormatName);
    CaseHeader h{.layout = parse_layout(root)};
    parse_launch(root["launch"], h);
    return h;
  });
}

// ---------------------------------------------------------------------------------------
// Reading the .npy files a case.json names.

std::vector<std::int32_t> read_array(const fs::path& dir, const ArrayField& field,
                                     std::int32_t num_reqs, std::int32_t num_slots) {
  const fs::path file = array_file(dir, field.name);
  const NpyHeader header = read_npy_header(file, NpyDtype::int32);
  const std::int64_t length = array_length(field.indexing, num_reqs, num_slots);
  if (header.shape != std::vector<std::int64_t>{length})
    fail_input("{}: shape {}, expected ({},) ({})", file.string(), npy_shape_string(header.shape),
               length,
               field.indexing == ArrayIndexing::by_slot        ? "num_slots"
               : field.indexing == ArrayIndexing::by_batch_row ? "num_reqs"
                                                               : "num_reqs + 1");
  std::vector<std::int32_t> values(static_cast<std::size_t>(length), 0);
  read_npy_data(file, header, std::as_writable_bytes(std::span<std::int32_t>(values)));
  return values;
}

RequestArrays read_arrays(const fs::path& dir, const std::vector<const ArrayField*>& fields,
                          std::int32_t num_reqs, std::int32_t num_slots) {
  RequestArrays arrays;
  for (const ArrayField* f : fields)
    arrays.*(f->member) = read_array(dir, *f, num_reqs, num_slots);
  return arrays;
}

BlockTables read_tables(const fs::path& dir, const CaseHeader& h) {
  BlockTables tables;
  for (std::size_t g = 0; g < h.layout.spec.groups.size(); ++g) {
    const fs::path file = table_file(dir, g);
    const NpyHeader header = read_npy_header(file, NpyDtype::int32);
    const std::array<std::int64_t, 2> shape = {h.num_rows, h.row_stride};
    expect_npy_shape(file, header, shape);
    BlockTable t{.num_rows = h.num_rows, .row_width = h.row_width, .row_stride = h.row_stride};
    t.block_ids.assign(static_cast<std::size_t>(header.num_elements()), 0);
    read_npy_data(file, header, std::as_writable_bytes(std::span<std::int32_t>(t.block_ids)));
    tables.groups.push_back(std::move(t));
  }
  return tables;
}

std::vector<Arena> read_arenas(const fs::path& dir, const Layout& layout) {
  std::vector<Arena> arenas;
  for (std::size_t i = 0; i < layout.arenas.size(); ++i) {
    const fs::path file = arena_file(dir, i);
    const NpyHeader header = read_npy_header(file, NpyDtype::uint8);
    const std::array<std::int64_t, 2> shape = {layout.arenas[i].num_blocks,
                                               layout.arenas[i].page_bytes};
    expect_npy_shape(file, header, shape); // before the arena is mapped
    Arena arena(layout.arenas[i].size_bytes());
    read_npy_data(file, header, arena.bytes());
    arenas.push_back(std::move(arena));
  }
  return arenas;
}

// ---------------------------------------------------------------------------------------
// Results.

CopyDecision parse_decision(const Field& n, const CaseHeader& h) {
  const std::int32_t num_tensors = static_cast<std::int32_t>(h.layout.tensors.size());
  CopyDecision d{
      .batch_row = n["batch_row"].int32(0, std::max(h.num_reqs - 1, 0)),
      .slot = n["slot"].int32(),
      .tensor = n["tensor"].int32(0, num_tensors - 1),
      .group = n["group"].int32(),
      .layer = n["layer"].int32(),
      .state = n["state"].int32(),
      .src_col = n["src_col"].int32(),
      .dst_col = n["dst_col"].int32(),
      .token_bias = n["token_bias"].int32(),
      .src_block_id = n["src_block_id"].int32(),
      .dst_block_id = n["dst_block_id"].int32(),
      .src_byte_offset = n["src_byte_offset"].integer(INT64_MIN, INT64_MAX),
      .bytes = n["bytes"].integer(INT64_MIN, INT64_MAX),
  };
  if (h.num_reqs == 0) n["batch_row"].fail("a launch of 0 rows has no decisions");
  return d;
}

LaunchStatus parse_status(std::string_view text) {
  if (text == "ok") return LaunchStatus::ok;
  if (text == "unsupported") return LaunchStatus::unsupported;
  fail_input("expected ok or unsupported, got '{}'", text);
}

// The arrays and arenas of `result` must have the sizes the case on disk declares.
void check_result_fits(const LaunchResult& result, const CaseHeader& h, const fs::path& dir) {
  const std::string where = (dir / "case.json").string();
  if (result.arenas.size() != h.layout.arenas.size())
    fail_input("{}: the result has {} arenas, the case {}", where, result.arenas.size(),
               h.layout.arenas.size());
  for (std::size_t i = 0; i < result.arenas.size(); ++i)
    if (result.arenas[i].size_bytes() != h.layout.arenas[i].size_bytes())
      fail_input("{}: result arena {} has {} bytes, the case's has {}", where, i,
                 result.arenas[i].size_bytes(), h.layout.arenas[i].size_bytes());
  for (const ArrayField& f : kArrayFields) {
    const std::size_t size = (result.requests.*f.member).size();
    const std::int64_t length = array_length(f.indexing, h.num_reqs, h.num_slots);
    if (size != 0 && static_cast<std::int64_t>(size) != length)
      fail_input("{}: result array {} has {} entries, the case needs {}", where, f.name, size,
                 length);
  }
}

} // namespace

json config_json(const CacheConfig& c) {
  return {{"mamba_block_size", c.mamba_block_size},
          {"attn_block_size", c.attn_block_size},
          {"num_spec_tokens", c.num_spec_tokens},
          {"num_spec_blocks", c.num_spec_blocks},
          {"mode", to_string(c.mode)},
          {"conv_layout", to_string(c.conv_layout)},
          {"runner", to_string(c.runner)},
          {"tp_size", c.tp_size}};
}

json group_json(const GroupSpec& g, ZeroParams zero_params) {
  json params = json::object();
  for (const FamilyParamField& f : kFamilyParamFields)
    if (zero_params == ZeroParams::written || g.params.*f.member != 0)
      params[std::string(f.name)] = g.params.*f.member;
  return {{"name", g.name},
          {"family", to_string(g.family)},
          {"params", params},
          {"num_layers", g.num_layers},
          {"conv_elem_size", g.conv_elem_size},
          {"temporal_elem_size", g.temporal_elem_size},
          {"page_policy", to_string(g.page_policy)},
          {"page_align_bytes", g.page_align_bytes}};
}

void save_case(const LaunchCase& launch_case, const std::filesystem::path& dir) {
  assert_well_formed(launch_case);
  std::error_code ec;
  fs::remove_all(dir / kResultDirName, ec); // a result of an earlier case would be stale
  if (ec) fail_input("{}: cannot remove: {}", (dir / kResultDirName).string(), ec.message());
  create_dir(dir);
  const BlockTables& tables = launch_case.block_tables;
  for (std::size_t g = 0; g < tables.groups.size(); ++g) {
    const BlockTable& t = tables.groups[g];
    const std::array<std::int64_t, 2> shape = {t.num_rows, t.row_stride};
    write_npy<std::int32_t>(table_file(dir, g), shape, t.block_ids);
  }
  const json arrays = write_arrays(dir, launch_case.requests);
  write_arenas(dir, launch_case.layout, launch_case.arenas);
  const BlockTable& first = tables.groups.front();
  json launch = {{"kind", to_string(launch_case.kind)}};
  launch.update(kind_columns_json(launch_case.kind));
  launch.update(json{{"num_reqs", launch_case.num_reqs},
                     {"num_slots", launch_case.num_slots},
                     {"block_table",
                      {{"num_rows", first.num_rows},
                       {"row_width", first.row_width},
                       {"row_stride", first.row_stride}}},
                     {"arrays", arrays}});
  // case.json last: a directory whose writing was cut short does not load.
  write_json(dir / "case.json", {{"format", kCaseFormatName},
                                 {"version", kCaseFormatVersion},
                                 {"config", config_json(launch_case.layout.config)},
                                 {"layout", layout_json(launch_case.layout)},
                                 {"launch", launch},
                                 {"metadata", metadata_json(launch_case.layout)}});
}

std::string case_layout_json(const Layout& layout) {
  return json{{"config", config_json(layout.config)},
              {"layout", layout_json(layout)},
              {"metadata", metadata_json(layout)}}
      .dump();
}

LaunchCase load_case(const std::filesystem::path& dir) {
  CaseHeader h = read_case_header(dir);
  LaunchCase c{.kind = h.kind, .num_reqs = h.num_reqs, .num_slots = h.num_slots};
  c.block_tables = read_tables(dir, h);
  c.requests = read_arrays(dir, h.arrays, h.num_reqs, h.num_slots);
  c.arenas = read_arenas(dir, h.layout);
  c.layout = std::move(h.layout);
  return c;
}

void save_result(const LaunchResult& result, const std::filesystem::path& dir) {
  const CaseHeader h = read_case_header(dir);
  check_result_fits(result, h, dir);
  const fs::path rdir = dir / kResultDirName;
  std::error_code ec;
  fs::remove_all(rdir, ec);
  if (ec) fail_input("{}: cannot remove: {}", rdir.string(), ec.message());
  create_dir(rdir);
  const json arrays = write_arrays(rdir, result.requests);
  write_arenas(rdir, h.layout, result.arenas);
  json decisions = json::array();
  for (const CopyDecision& d : result.decisions)
    decisions.push_back(decision_json(d));
  write_json(rdir / "result.json", {{"format", kResultFormatName},
                                    {"version", kCaseFormatVersion},
                                    {"status", to_string(result.status)},
                                    {"unsupported_reason", result.unsupported_reason},
                                    {"arrays", arrays},
                                    {"decisions", decisions}});
}

LaunchResult load_result(const std::filesystem::path& dir) {
  const CaseHeader h = read_case_header(dir);
  const fs::path rdir = dir / kResultDirName;
  const fs::path file = rdir / "result.json";
  const ReadJson doc = read_json(file);
  LaunchResult r;
  const std::vector<const ArrayField*> fields = read_file(file.string(), [&] {
    const Field root(doc);
    check_format(root, kResultFormatName);
    r.status = root["status"].parse_with(parse_status);
    r.unsupported_reason = root["unsupported_reason"].string(1 << 16);
    std::vector<const ArrayField*> names = parse_array_names(root["arrays"]);
    const Field decisions = root["decisions"];
    const std::size_t count = decisions.array_size(kJsonListMax);
    for (std::size_t i = 0; i < count; ++i)
      r.decisions.push_back(parse_decision(decisions[i], h));
    return names;
  });
  r.requests = read_arrays(rdir, fields, h.num_reqs, h.num_slots);
  r.arenas = read_arenas(rdir, h.layout);
  return r;
}

bool has_result(const std::filesystem::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kResultDirName / "result.json", ec);
}

void fail_in_case(const std::filesystem::path& dir, const LaunchInputError& error) {
  std::string files;
  for (const std::string& array : error.arrays)
    files += fmt::format("{}{}.npy", files.empty() ? "" : ", ", array);
  if (files.empty()) fail_input("{}: {}", dir.string(), error.what());
  fail_input("{}: {}: {}", dir.string(), files, error.what());
}

} // namespace mc::model
