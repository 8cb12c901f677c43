// The runs behind a report.html (pictures.h).
#include "show/pictures.h"

#include "model/errors.h"
#include "model/output_file.h"
#include "oracle/launch.h"
#include "show/engine_view.h"
#include "show/kernel_view.h"

#include <fmt/format.h>

namespace mc::show {
namespace {

void add_note(Header& header, const std::string& note) {
  header.note += (header.note.empty() ? "" : " ") + note;
}

// The backend's replay: the first failure, the bytes after it, and the views up to it.
struct BackendReplay {
  harness::ReplayResult result;
  std::optional<harness::Difference> failure;
  ArenaDiff bytes;
  std::optional<BlockDiff> finding_block;
  std::vector<harness::StepView> views;
};

BackendReplay replay_backend(const std::filesystem::path& trace, const EnginePictureOptions& o,
                             std::optional<model::Layout>& layout) {
  BackendReplay out;
  harness::ReplayOptions options = o.replay;
  options.on_view = [&out](const harness::StepView& v) { out.views.push_back(v); };
  options.on_failure = [&](const harness::Difference& d, const std::vector<model::Arena>& oracle,
                           const std::vector<model::Arena>& backend) {
    out.failure = d;
    if (!layout) return;
    if (d.is_finding()) {
      if (d.tensor >= 0 && d.block > 0 && d.block < layout->spec.num_blocks)
        out.finding_block = block_as_is(*layout, oracle, d.tensor, d.block);
    } else {
      out.bytes = diff_arenas(*layout, oracle, backend);
    }
  };
  scenarios::TraceReader reader(trace);
  model::CacheConfig config = reader.header().config;
  config.runner = o.replay.runner.value_or(config.runner);
  layout = model::build_layout(config, reader.header().layout_spec);
  out.result = harness::replay_trace(reader, options);
  return out;
}

} // namespace

std::string kernel_picture(const model::LaunchCase& launch, const Backend& backend,
                           const Isolate& isolate, const std::string& actual_name, Header header) {
  model::LaunchResult expected;
  try {
    expected = oracle::run_launch(launch);
  } catch (const model::InputError& e) {
    header.note = fmt::format("the oracle rejects the case: {}", e.what());
    return page_html(header.title, header_html(header));
  }
  const auto draw = [&](const model::LaunchResult* actual, Header h) {
    return kernel_report_html(KernelReport{.launch = launch,
                                           .expected = expected,
                                           .actual = actual,
                                           .actual_name = actual_name,
                                           .header = std::move(h)});
  };
  if (!backend) return draw(nullptr, std::move(header));
  const auto oracle_only = [&](const std::string& failure) {
    add_note(header, fmt::format("The backend failed on the case ({}): only the oracle's side is "
                                 "drawn.",
                                 failure));
    return draw(nullptr, std::move(header));
  };
  if (isolate) {
    std::string failure;
    std::optional<std::string> page = isolate(
        [&] {
          const model::LaunchResult actual = backend(launch);
          return draw(&actual, header);
        },
        failure);
    if (page) return std::move(*page);
    return oracle_only(failure);
  }
  try {
    const model::LaunchResult actual = backend(launch);
    return draw(&actual, std::move(header));
  } catch (const std::exception& e) {
    return oracle_only(e.what());
  }
}

std::string engine_picture(const std::filesystem::path& trace, const EnginePictureOptions& o) {
  const auto draw = [&trace, &o](bool with_backend) {
    Header header = o.header;
    std::optional<model::Layout> layout;
    EnginePictureOptions clean = o;
    clean.replay =
        harness::ReplayOptions{.runner = o.replay.runner, .v1_copy_path = o.replay.v1_copy_path};
    BackendReplay b = replay_backend(trace, with_backend ? o : clean, layout);
    if (!with_backend)
      add_note(header, "The backend failed while replaying the trace: only the oracle's views "
                       "are drawn.");
    // Past a backend's difference the oracle's own replay goes on: its views fill the timeline.
    if (b.failure && !b.failure->is_finding()) {
      std::optional<model::Layout> clean_layout;
      b.views = replay_backend(trace, clean, clean_layout).views;
    }
    if (header.failure.empty() && b.failure) header.failure = b.result.summary();
    EngineReport report{.layout = *layout,
                        .views = std::move(b.views),
                        .failure = b.failure,
                        .outcome = b.result.summary(),
                        .bytes = std::move(b.bytes),
                        .finding_block = std::move(b.finding_block),
                        .actual_name = o.actual_name,
                        .header = std::move(header)};
    return engine_report_html(report);
  };
  if (!o.isolate) return draw(true);
  std::string failure;
  if (std::optional<std::string> page = o.isolate([&] { return draw(true); }, failure))
    return std::move(*page);
  // The oracle-only replay: a malformed trace throws here as it did in the child.
  return draw(false);
}

bool write_picture(const std::filesystem::path& file, const std::string& html) {
  try {
    model::write_whole_file(file, html);
    return true;
  } catch (const model::EnvironmentError&) {
    return false;
  } catch (const model::InputError&) {
    return false;
  }
}

} // namespace mc::show
