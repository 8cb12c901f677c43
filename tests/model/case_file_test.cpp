// Case directories: exact round trips of cases and results for several presets, both conv
// layouts and every launch kind; a catalogue of malformed directories, each rejected with
// one line naming the file and the field.
#include "model/case_file.h"
#include "model/errors.h"
#include "model/launch_kinds.h"
#include "model/npy.h"
#include "tests/model/case_fixtures.h"
#include "tests/model/temp_dir.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <random>
#include <tuple>

namespace mc::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using testing::make_case;
using testing::make_result;
using testing::TempDir;

// ---------------------------------------------------------------------------------------
// Exact comparison of everything a case and a result hold.

auto params_tuple(const FamilyParams& p) {
  return std::tie(p.intermediate_size, p.n_groups, p.num_heads, p.head_dim, p.state_size,
                  p.conv_kernel, p.num_k_heads, p.num_v_heads, p.head_k_dim, p.head_v_dim);
}

void expect_same_layout(const Layout& a, const Layout& b) {
  const CacheConfig &ca = a.config, &cb = b.config;
  EXPECT_EQ(std::tie(ca.mamba_block_size, ca.attn_block_size, ca.num_spec_tokens,
                     ca.num_spec_blocks, ca.mode, ca.conv_layout, ca.runner, ca.tp_size),
            std::tie(cb.mamba_block_size, cb.attn_block_size, cb.num_spec_tokens,
                     cb.num_spec_blocks, cb.mode, cb.conv_layout, cb.runner, cb.tp_size));
  EXPECT_EQ(a.spec.num_blocks, b.spec.num_blocks);
  ASSERT_EQ(a.spec.groups.size(), b.spec.groups.size());
  for (std::size_t g = 0; g < a.spec.groups.size(); ++g) {
    const GroupSpec &ga = a.spec.groups[g], &gb = b.spec.groups[g];
    EXPECT_EQ(std::tie(ga.name, ga.family, ga.num_layers, ga.conv_elem_size, ga.temporal_elem_size,
                       ga.page_policy, ga.page_align_bytes),
              std::tie(gb.name, gb.family, gb.num_layers, gb.conv_elem_size, gb.temporal_elem_size,
                       gb.page_policy, gb.page_align_bytes));
    EXPECT_EQ(params_tuple(ga.params), params_tuple(gb.params));
  }
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const StateTensor &ta = a.tensors[i], &tb = b.tensors[i];
    EXPECT_EQ(std::tie(ta.group, ta.layer, ta.state, ta.conv_layout, ta.elem_size, ta.natural_bytes,
                       ta.arena, ta.offset_bytes, ta.block_stride_bytes),
              std::tie(tb.group, tb.layer, tb.state, tb.conv_layout, tb.elem_size, tb.natural_bytes,
                       tb.arena, tb.offset_bytes, tb.block_stride_bytes));
    EXPECT_EQ(std::tie(ta.shape.name, ta.shape.kind, ta.shape.dims, ta.shape.conv_dim,
                       ta.shape.conv_state_len),
              std::tie(tb.shape.name, tb.shape.kind, tb.shape.dims, tb.shape.conv_dim,
                       tb.shape.conv_state_len));
  }
  ASSERT_EQ(a.arenas.size(), b.arenas.size());
  for (std::size_t i = 0; i < a.arenas.size(); ++i) {
    EXPECT_EQ(a.arenas[i].page_bytes, b.arenas[i].page_bytes);
    EXPECT_EQ(a.arenas[i].num_blocks, b.arenas[i].num_blocks);
  }
}

void expect_same_arenas(const std::vector<Arena>& a, const std::vector<Arena>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].size_bytes(), b[i].size_bytes()) << "arena " << i;
    EXPECT_EQ(a[i].first_difference(b[i]), -1) << "arena " << i;
  }
}

void expect_same_case(const LaunchCase& a, const LaunchCase& b) {
  expect_same_layout(a.layout, b.layout);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.num_reqs, b.num_reqs);
  EXPECT_EQ(a.num_slots, b.num_slots);
  EXPECT_EQ(a.block_tables, b.block_tables);
  EXPECT_EQ(a.requests, b.requests);
  expect_same_arenas(a.arenas, b.arenas);
}

void expect_same_result(const LaunchResult& a, const LaunchResult& b) {
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.unsupported_reason, b.unsupported_reason);
  EXPECT_EQ(a.requests, b.requests);
  EXPECT_EQ(a.decisions, b.decisions);
  expect_same_arenas(a.arenas, b.arenas);
}

json read_json(const fs::path& file) {
  std::ifstream in(file);
  return json::parse(in);
}

void write_json(const fs::path& file, const json& j) {
  std::ofstream out(file, std::ios::trunc);
  out << j.dump(1);
}

void edit_json(const fs::path& file, const std::function<void(json&)>& edit) {
  json j = read_json(file);
  edit(j);
  write_json(file, j);
}

// ---------------------------------------------------------------------------------------
// Round trips.

const char* const kPresets[] = {"tiny-mixed",  "tiny-gdn",    "tiny-kda",  "tiny-mamba1",
                                "tiny-mamba2", "tiny-linear", "lfm2-1.2b", "tiny-short-conv"};

TEST(CaseFile, RoundTripsEveryPresetLayoutAndKindExactly) {
  TempDir tmp;
  std::uint32_t seed = 1;
  for (const char* preset : kPresets)
    for (const ConvLayout conv : {ConvLayout::SD, ConvLayout::DS})
      for (const LaunchKind kind : kAllLaunchKinds) {
        SCOPED_TRACE(fmt::format("{} {} {}", preset, to_string(conv), to_string(kind)));
        const fs::path dir =
            tmp.path() / fmt::format("{}_{}_{}", preset, to_string(conv), to_string(kind));
        const LaunchCase c = make_case(preset, conv, kind, ++seed);
        save_case(c, dir);
        EXPECT_FALSE(has_result(dir));
        expect_same_case(load_case(dir), c);
        for (const LaunchStatus status : {LaunchStatus::ok, LaunchStatus::unsupported}) {
          const LaunchResult r = make_result(c, status, ++seed);
          save_result(r, dir);
          EXPECT_TRUE(has_result(dir));
          expect_same_result(load_result(dir), r);
        }
      }
}

TEST(CaseFile, PrecopyResultWithRealDecisionsRoundTrips) {
  TempDir tmp;
  const LaunchCase c = make_case("tiny-mixed", ConvLayout::DS, LaunchKind::precopy, 7);
  const LaunchResult r = testing::precopy_result(c);
  ASSERT_EQ(r.decisions.size(), 2 * c.layout.tensors.size());
  save_case(c, tmp.path());
  save_result(r, tmp.path());
  expect_same_case(load_case(tmp.path()), c);
  expect_same_result(load_result(tmp.path()), r);
}

TEST(CaseFile, CaseJsonHoldsWhatPythonReadersNeed) {
  TempDir tmp;
  const LaunchCase c = make_case("tiny-mixed", ConvLayout::DS, LaunchKind::precopy, 3);
  save_case(c, tmp.path());
  const json j = read_json(tmp.path() / "case.json");
  EXPECT_EQ(j["format"], "mambacheck-case");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["config"]["conv_layout"], "DS");
  EXPECT_EQ(j["launch"]["kind"], "precopy");
  // The kind's columns, so that a reader needs no table of kinds of its own.
  EXPECT_EQ(j["launch"]["family"], "precopy");
  EXPECT_EQ(j["launch"]["phase"], "pre_step");
  EXPECT_EQ(j["launch"]["slots"], "idx_mapping");
  EXPECT_EQ(j["launch"]["table_rows"], "batch_row");
  EXPECT_EQ(j["launch"]["moves_state"], true);
  EXPECT_EQ(j["launch"]["work"], "batch_rows");
  EXPECT_EQ(j["launch"]["inputs"], json({"idx_mapping", "state_idx", "src_col", "token_bias"}));
  EXPECT_EQ(j["launch"]["block_table"]["row_stride"], 8);
  EXPECT_EQ(j["launch"]["arrays"], json({"idx_mapping", "state_idx", "src_col", "token_bias"}));
  ASSERT_EQ(j["layout"]["tensors"].size(), c.layout.tensors.size());
  ASSERT_EQ(j["metadata"].size(), c.layout.tensors.size());
  for (std::size_t i = 0; i < c.layout.tensors.size(); ++i) {
    EXPECT_EQ(j["metadata"][i]["base_addr"], c.layout.tensors[i].offset_bytes);
    EXPECT_EQ(j["layout"]["tensors"][i]["dims"], c.layout.tensors[i].shape.dims);
  }
  const NpyArray<std::int32_t> table = read_npy<std::int32_t>(tmp.path() / "block_table_0.npy");
  EXPECT_EQ(table.shape, (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(table.values, c.block_tables.groups[0].block_ids);
  const NpyHeader arena = read_npy_header(tmp.path() / "arena_6.npy", NpyDtype::uint8);
  EXPECT_EQ(arena.shape, (std::vector<std::int64_t>{c.layout.arenas[6].num_blocks,
                                                    c.layout.arenas[6].page_bytes}));
}

TEST(CaseFile, EveryKindWritesItsColumnsAndACaseWithoutThemStillLoads) {
  TempDir tmp;
  std::uint32_t seed = 11;
  for (const LaunchKindInfo& info : kLaunchKinds) {
    SCOPED_TRACE(info.name);
    const fs::path dir = tmp.path() / std::string(info.name);
    const LaunchCase c = make_case("tiny-mamba2", ConvLayout::SD, info.kind, ++seed);
    save_case(c, dir);
    const json launch = read_json(dir / "case.json")["launch"];
    EXPECT_EQ(launch["family"], std::string(to_string(info.family)));
    EXPECT_EQ(launch["phase"], std::string(to_string(info.phase)));
    EXPECT_EQ(launch["table_rows"], info.tables_by_slot ? "slot" : "batch_row");
    EXPECT_EQ(launch["work"], std::string(to_string(info.work)));
    // A case written before the columns were carried.
    edit_json(dir / "case.json", [](json& j) {
      for (const char* column :
           {"family", "phase", "slots", "table_rows", "moves_state", "work", "inputs"})
        j["launch"].erase(column);
    });
    expect_same_case(load_case(dir), c);
  }
}

TEST(CaseFile, SavingACaseDropsAStaleResult) {
  TempDir tmp;
  const LaunchCase c = make_case("tiny-gdn", ConvLayout::SD, LaunchKind::postprocess, 3);
  save_case(c, tmp.path());
  save_result(make_result(c, LaunchStatus::ok, 4), tmp.path());
  ASSERT_TRUE(has_result(tmp.path()));
  save_case(c, tmp.path());
  EXPECT_FALSE(has_result(tmp.path()));
}

TEST(CaseFile, SaveResultNeedsAMatchingCase) {
  TempDir tmp;
  const LaunchCase c = make_case("tiny-gdn", ConvLayout::SD, LaunchKind::postprocess, 3);
  const LaunchResult r = make_result(c, LaunchStatus::ok, 4);
  EXPECT_THROW(save_result(r, tmp.path()), InputError); // no case.json
  save_case(make_case("tiny-kda", ConvLayout::SD, LaunchKind::postprocess, 3), tmp.path());
  try {
    save_result(r, tmp.path());
    ADD_FAILURE() << "a result of another layout was saved";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("case.json: the result has"), std::string::npos)
        << e.what();
  }
}

TEST(CaseFile, EmptyLaunchRoundTrips) {
  TempDir tmp;
  LaunchCase c = make_case("tiny-mixed", ConvLayout::SD, LaunchKind::preprocess_align, 2);
  c.num_reqs = 0;
  c.num_slots = 0;
  c.requests = RequestArrays{};
  for (BlockTable& t : c.block_tables.groups)
    t = BlockTable::make(0, 6, 8);
  save_case(c, tmp.path());
  expect_same_case(load_case(tmp.path()), c);
  const LaunchResult r{.arenas = c.clone().arenas};
  save_result(r, tmp.path());
  expect_same_result(load_result(tmp.path()), r);
}

TEST(CaseFile, InvalidUtf8InAReasonIsReplacedNotThrown) {
  TempDir tmp;
  const LaunchCase c = make_case("tiny-gdn", ConvLayout::DS, LaunchKind::batch_copy, 3);
  LaunchResult r = make_result(c, LaunchStatus::unsupported, 4);
  r.unsupported_reason = "bad \xff byte";
  save_case(c, tmp.path());
  save_result(r, tmp.path());
  EXPECT_EQ(load_result(tmp.path()).unsupported_reason, "bad \xef\xbf\xbd byte"); // U+FFFD
}

// Random damage to case.json, result.json and .npy headers: every load either succeeds or
// throws InputError (never another exception, never a crash).
TEST(CaseFile, RandomDamageIsAnInputErrorOrHarmless) {
  TempDir tmp;
  const fs::path base = tmp.path() / "base";
  const LaunchCase c = make_case("tiny-mixed", ConvLayout::DS, LaunchKind::precopy, 21);
  save_case(c, base);
  save_result(testing::precopy_result(c), base);
  const char* const files[] = {"case.json",         "expected/result.json", "arena_2.npy",
                               "block_table_1.npy", "src_col.npy",          "expected/arena_0.npy"};
  constexpr std::string_view kJsonChars = "{}[],:\"0123456789-.e tfn";
  std::mt19937 rng(12345);
  int rejected = 0;
  for (int i = 0; i < 300; ++i) {
    const fs::path dir = tmp.path() / "damaged";
    fs::remove_all(dir);
    fs::copy(base, dir, fs::copy_options::recursive);
    const fs::path file = dir / files[rng() % std::size(files)];
    std::string bytes;
    {
      std::ifstream in(file, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    const std::size_t span =
        std::min<std::size_t>(bytes.size(), file.extension() == ".npy" ? 128 : bytes.size());
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % std::min(span, bytes.size());
      switch (rng() % 3) {
      case 0:
        bytes[at] = static_cast<char>(rng());
        break;
      case 1:
        bytes.resize(at);
        break;
      default:
        bytes.insert(at, 1, kJsonChars[rng() % kJsonChars.size()]);
        break;
      }
      if (bytes.empty()) break;
    }
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    try {
      load_case(dir);
      load_result(dir);
    } catch (const InputError& e) {
      ++rejected;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not an InputError: " << e.what();
    }
  }
  EXPECT_GT(rejected, 200);
}

// ---------------------------------------------------------------------------------------
// Malformed directories.

struct Malformed {
  std::string name;
  std::function<void(const fs::path& dir)> mutate;
  std::string file;  // the message starts with dir / file
  std::string field; // and contains this
  bool result = false;
};

std::vector<std::int32_t> ints(std::size_t n) {
  return std::vector<std::int32_t>(n, 1);
}

void write_ints(const fs::path& file, std::vector<std::int64_t> shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape)
    n *= d;
  write_npy<std::int32_t>(file, shape, ints(static_cast<std::size_t>(n)));
}

std::vector<Malformed> malformed_cases() {
  const auto edit = [](std::function<void(json&)> f) {
    return [f](const fs::path& dir) { edit_json(dir / "case.json", f); };
  };
  const auto edit_result = [](std::function<void(json&)> f) {
    return [f](const fs::path& dir) { edit_json(dir / "expected" / "result.json", f); };
  };
  const auto text = [](std::string file, std::string content) {
    return [file, content](const fs::path& dir) { std::ofstream(dir / file) << content; };
  };
  std::string deep = "{\"format\": ";
  for (int i = 0; i < 200; ++i)
    deep += "[";
  for (int i = 0; i < 200; ++i)
    deep += "]";
  deep += "}";
  return {
      {"wrong dtype",
       [](const fs::path& d) {
         write_npy<std::int64_t>(d / "state_idx.npy", std::vector<std::int64_t>{5},
                                 std::vector<std::int64_t>(5));
       },
       "state_idx.npy", ": dtype '<i8', expected '<i4'"},
      {"block table shape",
       [](const fs::path& d) {
         write_ints(d / "block_table_1.npy", {4, 6});
       },
       "block_table_1.npy", ": shape (4, 6), expected (4, 8)"},
      {"block table dtype",
       [](const fs::path& d) {
         write_npy<std::uint8_t>(d / "block_table_0.npy", std::vector<std::int64_t>{4, 8},
                                 std::vector<std::uint8_t>(32));
       },
       "block_table_0.npy", ": dtype '|u1', expected '<i4'"},
      {"array length", [](const fs::path& d) { write_ints(d / "state_idx.npy", {4}); },
       "state_idx.npy", ": shape (4,), expected (5,) (num_slots)"},
      {"idx_mapping length", [](const fs::path& d) { write_ints(d / "idx_mapping.npy", {5}); },
       "idx_mapping.npy", ": shape (5,), expected (3,) (num_reqs)"},
      {"2-d array",
       [](const fs::path& d) {
         write_ints(d / "src_col.npy", {5, 1});
       },
       "src_col.npy", ": shape (5, 1), expected (5,)"},
      {"missing npy", [](const fs::path& d) { fs::remove(d / "token_bias.npy"); }, "token_bias.npy",
       ": cannot open"},
      {"truncated npy",
       [](const fs::path& d) {
         fs::resize_file(d / "arena_0.npy", fs::file_size(d / "arena_0.npy") - 1);
       },
       "arena_0.npy", ": truncated: file has"},
      {"truncated npy header", [](const fs::path& d) { fs::resize_file(d / "arena_2.npy", 40); },
       "arena_2.npy", ": truncated: 40 bytes, the header alone needs"},
      {"arena size",
       [](const fs::path& d) {
         write_npy<std::uint8_t>(d / "arena_1.npy", std::vector<std::int64_t>{31, 96},
                                 std::vector<std::uint8_t>(31 * 96));
       },
       "arena_1.npy", ": shape (31, 96), expected (32, 96)"},
      {"arena fortran order",
       [](const fs::path& d) {
         std::fstream f(d / "arena_0.npy", std::ios::in | std::ios::out | std::ios::binary);
         std::string head(128, '\0');
         f.read(head.data(), 128);
         head.replace(head.find("False"), 5, "True "); // same length, the data stays put
         f.seekp(0);
         f.write(head.data(), 128);
       },
       "arena_0.npy", ": fortran_order is True"},
      {"missing case.json", [](const fs::path& d) { fs::remove(d / "case.json"); }, "case.json",
       ": missing"},
      {"garbage json", text("case.json", "{\"format\": \"mambacheck-case\", "), "case.json",
       ": json: the JSON value is cut short: the file ends at line 1, column 30"},
      {"text after the json", text("case.json", "{}\n{}"), "case.json",
       ": json: text after the end of the JSON value, at line 2, column 1 (one value in the "
       "file)"},
      {"a number past a double", text("case.json", "{\"version\": 1e400}"), "case.json",
       ": version: the number 1e400 is too large"},
      {"a NUL byte in case.json", text("case.json", std::string("{}\n\0", 4)), "case.json",
       ": json: a NUL byte at line 2, column 1"},
      {"json not an object", text("case.json", "[1, 2]"), "case.json",
       ": (top level): expected an object"},
      {"deep json", text("case.json", deep), "case.json", ": nested deeper than 32"},
      {"wrong format", edit([](json& j) { j["format"] = "mambacheck-trace"; }), "case.json",
       ": format: 'mambacheck-trace', expected 'mambacheck-case'"},
      {"future version", edit([](json& j) { j["version"] = 2; }), "case.json",
       ": version: version 2 is newer than this mambacheck reads (1)"},
      {"version zero", edit([](json& j) { j["version"] = 0; }), "case.json",
       ": version: version 0"},
      {"missing field", edit([](json& j) { j["launch"].erase("num_slots"); }), "case.json",
       ": launch.num_slots: missing"},
      {"missing nested field",
       edit([](json& j) { j["layout"]["groups"][1]["params"].erase("conv_kernel"); }), "case.json",
       ": layout.groups[1].params.conv_kernel: missing"},
      {"missing metadata", edit([](json& j) { j.erase("metadata"); }), "case.json",
       ": metadata: missing"},
      {"wrong type", edit([](json& j) { j["launch"]["num_reqs"] = "3"; }), "case.json",
       ": launch.num_reqs: expected an integer, got string \"3\""},
      {"float", edit([](json& j) { j["config"]["mamba_block_size"] = 4.5; }), "case.json",
       ": config.mamba_block_size: expected an integer, got number 4.5"},
      {"negative", edit([](json& j) { j["launch"]["num_slots"] = -1; }), "case.json",
       ": launch.num_slots: -1 is out of range 0..1048576"},
      {"wrong type list", edit([](json& j) { j["layout"]["tensors"][0]["dims"] = "x"; }),
       "case.json", ": layout.tensors[0].dims: expected an array, got string"},
      {"bad launch kind", edit([](json& j) { j["launch"]["kind"] = "postprocess_v3"; }),
       "case.json", ": launch.kind: launch kind: expected postprocess"},
      {"bad mode", edit([](json& j) { j["config"]["mode"] = "some"; }), "case.json",
       ": config.mode: mode: expected none, align or all"},
      {"bad family", edit([](json& j) { j["layout"]["groups"][0]["family"] = "mamba3"; }),
       "case.json", ": layout.groups[0].family: family: expected one of"},
      {"bad page policy", edit([](json& j) { j["layout"]["groups"][2]["page_policy"] = "packed"; }),
       "case.json", ": layout.groups[2].page_policy: expected shared or separate"},
      {"bad config", edit([](json& j) { j["config"]["mamba_block_size"] = 0; }), "case.json",
       ": config: mamba_block_size must be in 1..65536, got 0"},
      {"bad layout", edit([](json& j) { j["layout"]["groups"][1]["conv_elem_size"] = 3; }),
       "case.json", ": layout: group 1 (conv) conv element size must be 2, 4 or 8, got 3"},
      {"param out of range",
       edit([](json& j) { j["layout"]["groups"][0]["params"]["num_heads"] = 1LL << 40; }),
       "case.json", ": layout.groups[0].params.num_heads: 1099511627776 is out of range"},
      {"huge arenas", edit([](json& j) {
         j["layout"]["num_blocks"] = 1 << 30;
         j["layout"]["groups"][1]["params"]["intermediate_size"] = 65536;
       }),
       "case.json", ": layout: the arenas need more than"},
      {"derived tensor mismatch",
       edit([](json& j) { j["layout"]["tensors"][1]["offset_bytes"] = 56; }), "case.json",
       ": layout.tensors[1].offset_bytes: 56 does not match the layout rebuilt from the spec (48)"},
      {"derived name mismatch", edit([](json& j) { j["layout"]["tensors"][5]["name"] = "conv_q"; }),
       "case.json", ": layout.tensors[5].name: 'conv_q' does not match"},
      {"tensor count", edit([](json& j) { j["layout"]["tensors"].erase(8); }), "case.json",
       ": layout.tensors: 8 tensors, the layout rebuilt from the spec has 9"},
      {"arena spec mismatch", edit([](json& j) { j["layout"]["arenas"][0]["page_bytes"] = 104; }),
       "case.json", ": layout.arenas[0].page_bytes: 104 does not match"},
      {"metadata mismatch", edit([](json& j) { j["metadata"][2]["inner_size"] = 7; }), "case.json",
       ": metadata[2].inner_size: 7 does not match"},
      {"unknown array", edit([](json& j) { j["launch"]["arrays"].push_back("bogus"); }),
       "case.json", ": launch.arrays[4]: unknown array 'bogus' (known: idx_mapping,"},
      {"array twice", edit([](json& j) { j["launch"]["arrays"].push_back("src_col"); }),
       "case.json", ": launch.arrays[4]: array 'src_col' is listed twice"},
      {"missing required array", edit([](json& j) { j["launch"]["arrays"].erase(2); }), "case.json",
       ": launch.arrays: precopy needs 'src_col'"},
      {"row stride below width",
       edit([](json& j) { j["launch"]["block_table"]["row_stride"] = 4; }), "case.json",
       ": launch.block_table.row_stride: 4 is less than row_width 6"},
      {"too few rows", edit([](json& j) { j["launch"]["block_table"]["num_rows"] = 2; }),
       "case.json", ": launch.block_table.num_rows: 2 rows, fewer than the 3 batch rows"},
      {"column of another kind", edit([](json& j) { j["launch"]["table_rows"] = "slot"; }),
       "case.json", R"(: launch.table_rows: "slot", but precopy has "batch_row")"},
      {"one column missing", edit([](json& j) { j["launch"].erase("work"); }), "case.json",
       ": launch.work: missing"},
      {"v1 kind with slots", edit([](json& j) { j["launch"]["kind"] = "batch_copy"; }), "case.json",
       ": launch.num_slots: 5, but batch_copy indexes by request row"},
      // The result directory.
      {"result future version", edit_result([](json& j) { j["version"] = 7; }),
       "expected/result.json", ": version: version 7 is newer", true},
      {"result garbage", text("expected/result.json", "status: ok"), "expected/result.json",
       ": json: not valid JSON at line 1, column 1: invalid literal", true},
      {"result bad status", edit_result([](json& j) { j["status"] = "maybe"; }),
       "expected/result.json", ": status: expected ok or unsupported, got 'maybe'", true},
      {"decision missing field", edit_result([](json& j) { j["decisions"][3].erase("bytes"); }),
       "expected/result.json", ": decisions[3].bytes: missing", true},
      {"decision wrong type", edit_result([](json& j) { j["decisions"][0]["slot"] = nullptr; }),
       "expected/result.json", ": decisions[0].slot: expected an integer, got null", true},
      {"decision tensor range", edit_result([](json& j) { j["decisions"][1]["tensor"] = 9; }),
       "expected/result.json", ": decisions[1].tensor: 9 is out of range 0..8", true},
      {"decision row range", edit_result([](json& j) { j["decisions"][1]["batch_row"] = 3; }),
       "expected/result.json", ": decisions[1].batch_row: 3 is out of range 0..2", true},
      {"decisions not a list", edit_result([](json& j) { j["decisions"] = json::object(); }),
       "expected/result.json", ": decisions: expected an array, got object", true},
      {"result array length",
       [](const fs::path& d) { write_ints(d / "expected" / "num_accepted_out.npy", {3}); },
       "expected/num_accepted_out.npy", ": shape (3,), expected (5,) (num_slots)", true},
      {"result arena truncated",
       [](const fs::path& d) {
         const fs::path f = d / "expected" / "arena_6.npy";
         fs::resize_file(f, fs::file_size(f) - 16);
       },
       "expected/arena_6.npy", ": truncated", true},
      {"result case broken", edit([](json& j) { j["launch"].erase("kind"); }), "case.json",
       ": launch.kind: missing", true},
  };
}

TEST(CaseFile, RejectsMalformedDirectoriesNamingFileAndField) {
  TempDir tmp;
  const fs::path base = tmp.path() / "base";
  const LaunchCase c = make_case("tiny-mixed", ConvLayout::DS, LaunchKind::precopy, 11);
  save_case(c, base);
  save_result(make_result(c, LaunchStatus::ok, 12), base);
  ASSERT_NO_THROW(load_case(base));
  ASSERT_NO_THROW(load_result(base));
  int index = 0;
  for (const Malformed& m : malformed_cases()) {
    SCOPED_TRACE(m.name);
    const fs::path dir = tmp.path() / fmt::format("bad_{}", index++);
    fs::copy(base, dir, fs::copy_options::recursive);
    m.mutate(dir);
    try {
      if (m.result)
        load_result(dir);
      else
        load_case(dir);
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      const std::string message = e.what();
      const std::string prefix = (dir / m.file).string();
      EXPECT_EQ(message.rfind(prefix, 0), 0u) << message;
      EXPECT_NE(message.find(m.field), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
}

} // namespace
} // namespace mc::model
