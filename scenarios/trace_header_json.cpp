// The header line: config, layout (preset or inline spec), pool sizes, derived vocabulary,
// free-form source (FORMAT.md, "Header line").
#include "scenarios/trace_header_json.h"

#include "model/case_file.h"
#include "model/errors.h"
#include "model/presets.h"

namespace mc::scenarios {
namespace {

using ojson = nlohmann::ordered_json;

ojson group_to_json(const model::GroupSpec& g) {
  return model::group_json(g, model::ZeroParams::left_out);
}

// Whether the groups are still the preset's: a run that cut layers (run --layers) or a shrunk
// case names its groups itself.
bool preset_groups(const TraceHeader& h) {
  if (h.preset.empty()) return false;
  const model::Preset& preset = model::find_preset(h.preset);
  if (preset.spec.groups.size() != h.layout_spec.groups.size()) return false;
  for (std::size_t g = 0; g < preset.spec.groups.size(); ++g)
    if (group_to_json(preset.spec.groups[g]) != group_to_json(h.layout_spec.groups[g]))
      return false;
  return true;
}

ojson layout_to_json(const TraceHeader& h) {
  if (preset_groups(h)) return {{"preset", h.preset}, {"num_blocks", h.layout_spec.num_blocks}};
  ojson groups = ojson::array();
  for (const model::GroupSpec& g : h.layout_spec.groups)
    groups.push_back(group_to_json(g));
  return {{"groups", groups}, {"num_blocks", h.layout_spec.num_blocks}};
}

// model/ starts its messages with its own name of the field ("mode: expected ..."); the
// trace's path replaces it.
std::string without_prefix(const model::InputError& e) {
  const std::string what = e.what();
  const std::size_t cut = what.find(": ");
  return cut == std::string::npos ? what : what.substr(cut + 2);
}

// Runs a parser of model/ (which throws InputError) and names this field when it throws.
template <typename Parse> auto parse_enum(const Field& f, Parse parse) {
  const std::string text = f.string(64);
  try {
    return parse(text);
  } catch (const model::InputError& e) {
    f.fail("{}", without_prefix(e));
  }
}

model::CacheConfig config_from_json(const Field& f) {
  f.expect_object({"mamba_block_size", "attn_block_size", "num_spec_tokens", "num_spec_blocks",
                   "mode", "conv_layout", "runner", "tp_size"});
  return {.mamba_block_size = f["mamba_block_size"].int32(1, model::kBlockSizeMax),
          .attn_block_size = f["attn_block_size"].int32(1, model::kBlockSizeMax),
          .num_spec_tokens = f["num_spec_tokens"].int32(0, model::kSpecTokensMax),
          .num_spec_blocks = f["num_spec_blocks"].int32(0, model::kSpecTokensMax),
          .mode = parse_enum(f["mode"], model::parse_cache_mode),
          .conv_layout = parse_enum(f["conv_layout"], model::parse_conv_layout),
          .runner = parse_enum(f["runner"], model::parse_runner),
          .tp_size = f["tp_size"].int32(1, model::kTpSizeMax)};
}

model::FamilyParams params_from_json(const Field& f) {
  if (!f.value().is_object()) f.fail("expected an object");
  for (const auto& item : f.value().items()) {
    bool known = item.key().starts_with("x_");
    for (const model::FamilyParamField& p : model::kFamilyParamFields)
      known = known || item.key() == p.name;
    if (!known) f[item.key()].fail("unknown family parameter");
  }
  model::FamilyParams params;
  for (const model::FamilyParamField& p : model::kFamilyParamFields)
    if (f.has(p.name)) params.*p.member = f[p.name].integer(0, kFamilyParamMax);
  return params;
}

model::GroupSpec group_from_json(const Field& f) {
  f.expect_object({"name", "family", "params", "num_layers", "conv_elem_size", "temporal_elem_size",
                   "page_policy", "page_align_bytes"});
  return {.name = f["name"].string(64),
          .family = parse_enum(f["family"], model::parse_family),
          .params = params_from_json(f["params"]),
          .num_layers = f["num_layers"].int32(1, model::kLayersMax),
          .conv_elem_size = f["conv_elem_size"].int32(1, 8),
          .temporal_elem_size = f["temporal_elem_size"].int32(1, 8),
          .page_policy = parse_enum(f["page_policy"], model::parse_page_policy),
          .page_align_bytes = f["page_align_bytes"].integer(1, std::int64_t{1} << 30)};
}

void layout_from_json(const Field& f, TraceHeader& h) {
  if (f.value().is_object() && f.value().contains("preset")) {
    f.expect_object({"preset", "num_blocks"});
    h.preset = f["preset"].string(64);
    try {
      h.layout_spec = model::find_preset(h.preset).spec;
    } catch (const model::InputError& e) {
      f["preset"].fail("{}", without_prefix(e));
    }
    if (f.has("num_blocks"))
      h.layout_spec.num_blocks = f["num_blocks"].integer(2, model::kBlocksMax);
    return;
  }
  f.expect_object({"groups", "num_blocks"});
  const Field groups = f["groups"];
  const std::size_t num_groups = groups.array_size(model::kGroupsMax);
  if (num_groups == 0) groups.fail("at least one mamba group is required");
  for (std::size_t g = 0; g < num_groups; ++g)
    h.layout_spec.groups.push_back(group_from_json(groups[g]));
  h.layout_spec.num_blocks = f["num_blocks"].integer(2, model::kBlocksMax);
}

void pools_from_json(const Field& root, TraceHeader& h) {
  const std::size_t num_groups = h.layout_spec.groups.size();
  const auto num_blocks = static_cast<std::int32_t>(
      std::min<std::int64_t>(h.layout_spec.num_blocks, std::numeric_limits<std::int32_t>::max()));
  if (!root.has("block_pool_sizes")) {
    h.block_pool_sizes.assign(num_groups, num_blocks);
    return;
  }
  const Field pools = root["block_pool_sizes"];
  if (pools.array_size(model::kGroupsMax) != num_groups)
    pools.fail("{} entries, the layout has {} groups", pools.value().size(), num_groups);
  h.block_pool_sizes = pools.int32_list(2, num_blocks, num_groups);
}

void contract_from_json(const Field& f, model::SchedulerContract& c, std::int32_t version) {
  if (version >= kTraceFormatVersionCopies)
    f.expect_object({"cache_registration", "eagle", "unordered_writer", "attention_groups",
                     "shared_pool", "hash_block_size"});
  else
    f.expect_object(
        {"cache_registration", "eagle", "unordered_writer", "attention_groups", "shared_pool"});
  if (f.has("cache_registration")) {
    const std::string name = f["cache_registration"].string(32);
    const std::optional<model::CacheRegistration> r = model::find_cache_registration(name);
    if (!r) f["cache_registration"].fail("expected after_commit or at_schedule, got '{}'", name);
    c.registration = *r;
  }
  c.eagle = f.has("eagle") && f["eagle"].boolean();
  c.unordered_writer = f.has("unordered_writer") && f["unordered_writer"].boolean();
  if (f.has("attention_groups"))
    c.attention_groups = f["attention_groups"].int32(0, static_cast<std::int32_t>(model::kGroupsMax));
  c.shared_pool = f.has("shared_pool") && f["shared_pool"].boolean();
  if (f.has("hash_block_size"))
    c.hash_block_size = f["hash_block_size"].int32(1, model::kBlockSizeMax);
}

// A hash unit below the block size divides it, in align mode (oracle/engine/options.h).
void check_hash_unit(const Field& root, const TraceHeader& h) {
  const std::int32_t unit = h.contract.hash_block_size;
  const std::int32_t B = h.config.mamba_block_size;
  if (unit == 0 || unit == B) return;
  const Field f = root["scheduler"]["hash_block_size"];
  if (unit > B || B % unit != 0) f.fail("{} must divide mamba_block_size {}", unit, B);
  if (h.config.mode != model::CacheMode::align)
    f.fail("{} below mamba_block_size {} needs align mode (partial-hash hits)", unit, B);
  if (h.contract.eagle)
    f.fail("{} below mamba_block_size {} with an EAGLE drafter is not modelled", unit, B);
}

void check_format_and_version(const Field& root) {
  if (!root.value().is_object()) root.fail("the header line must be a JSON object");
  const std::string format = root["format"].string(64);
  if (format != kTraceFormatName)
    root["format"].fail("expected '{}', got '{}'", kTraceFormatName, format);
  const std::int64_t version = root["version"].integer(0, std::numeric_limits<std::int32_t>::max());
  if (version > kTraceFormatVersion)
    root["version"].fail("this trace is format version {}; this mambacheck reads version {} "
                         "only: use a newer mambacheck",
                         version, kTraceFormatVersion);
  if (version < 1) root["version"].fail("versions start at 1, got {}", version);
}

// Pool sizes as written: the header's, or num_blocks for every group when it has none.
std::vector<std::int32_t> resolved_pool_sizes(const TraceHeader& header) {
  if (!header.block_pool_sizes.empty()) return header.block_pool_sizes;
  return std::vector<std::int32_t>(header.layout_spec.groups.size(),
                                   static_cast<std::int32_t>(header.layout_spec.num_blocks));
}

} // namespace

nlohmann::ordered_json header_to_json(const TraceHeader& header) {
  ojson out = {{"format", kTraceFormatName},
               {"version", header.version},
               {"config", model::config_json(header.config)},
               {"layout", layout_to_json(header)},
               {"block_pool_sizes", resolved_pool_sizes(header)},
               {"derived_vocab_size", header.derived_vocab_size}};
  if (header.async_scheduling) out["async_scheduling"] = true;
  if (header.contract != model::SchedulerContract{}) {
    ojson c = ojson::object();
    c["cache_registration"] = model::to_string(header.contract.registration);
    if (header.contract.eagle) c["eagle"] = true;
    if (header.contract.unordered_writer) c["unordered_writer"] = true;
    if (header.contract.attention_groups > 0)
      c["attention_groups"] = header.contract.attention_groups;
    if (header.contract.shared_pool) c["shared_pool"] = true;
    if (header.contract.hash_block_size != 0)
      c["hash_block_size"] = header.contract.hash_block_size;
    out["scheduler"] = std::move(c);
  }
  if (!header.source.is_null()) out["source"] = ojson::parse(header.source.dump());
  return out;
}

TraceHeader header_from_json(const Field& root) {
  check_format_and_version(root);
  TraceHeader h;
  h.version = static_cast<std::int32_t>(root["version"].integer(1, kTraceFormatVersion));
  if (h.version >= kTraceFormatVersionContract)
    root.expect_object({"format", "version", "config", "layout", "block_pool_sizes",
                        "derived_vocab_size", "async_scheduling", "scheduler", "source"});
  else if (h.version >= kTraceFormatVersionAsync)
    root.expect_object({"format", "version", "config", "layout", "block_pool_sizes",
                        "derived_vocab_size", "async_scheduling", "source"});
  else
    root.expect_object({"format", "version", "config", "layout", "block_pool_sizes",
                        "derived_vocab_size", "source"});
  h.async_scheduling = root.has("async_scheduling") && root["async_scheduling"].boolean();
  if (root.has("scheduler")) contract_from_json(root["scheduler"], h.contract, h.version);
  h.config = config_from_json(root["config"]);
  check_hash_unit(root, h);
  layout_from_json(root["layout"], h);
  pools_from_json(root, h);
  if (root.has("derived_vocab_size"))
    h.derived_vocab_size =
        root["derived_vocab_size"].int32(1, std::numeric_limits<std::int32_t>::max());
  if (root.has("source")) {
    const Field source = root["source"];
    if (!source.value().is_object()) source.fail("expected an object (free-form metadata)");
    if (source.value().dump().size() > kSourceBytesMax)
      source.fail("more than {} bytes", kSourceBytesMax);
    h.source = source.value();
  }
  return h;
}

} // namespace mc::scenarios
