// Merging the JSON reports of the parts of one campaign (`mambacheck merge`): the shards of a
// campaign run on a cluster (fuzz/shard.h), and an interrupted part with its --resume-from
// continuation. The merged report is the report the single campaign writes for the same seed
// and cases: counts, size classes and coverage summed; each signature's finding taken from its
// earliest case (the one the single campaign would have rerun and shrunk, with the same result:
// shrinking is deterministic), with the failing cases of every part; what is still interrupted
// kept, so the campaign can be continued.
//
// Parts written by an older version of the report (fuzz/campaign/campaign.h, upgrade_report)
// are read as the current version; the merged report is of the current version.
//
// Parts are refused (InputError, one line) when they cannot be one campaign: different levels,
// seeds, options or shard counts, the same shard twice, cases covered by two parts. Cases that
// no part covers (a shard missing, a gap before a continuation) are refused too, unless
// `partial` is set: the merged report then lists them under "partial".
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mc::fuzz {

struct ReportPart {
  std::string name;               // the file it came from, for messages
  nlohmann::json report; // as `fuzz --report` wrote it (one level, or both)
};

struct MergedReports {
  nlohmann::json report;        // the campaign's report (one level, or both)
  int parts = 0;                 // reports merged
  std::int64_t shard_count = 1;  // N of the shards merged
  int interrupted_signal = 0;    // a part still interrupted: its signal (the first); else 0
};

// Throws model::InputError when the parts are not one campaign (see above), or when a report
// is not a fuzz report.
MergedReports merge_reports(const std::vector<ReportPart>& parts, bool partial = false);

} // namespace mc::fuzz
