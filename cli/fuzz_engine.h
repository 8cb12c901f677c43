// The engine level of `mambacheck fuzz` (fuzz/engine/engine_fuzz.h), for fuzz_cmd.cpp's
// `--level engine` and `--level both`: its summary and finding message.
#pragma once

#include "fuzz/campaign/campaign.h"
#include "fuzz/engine/engine_fuzz.h"
#include "fuzz/mutants/mutants.h"
#include "gpu/mutant.h"

#include <string>

namespace mc::cli {

// A report's cases counted by `by` (CampaignReport::cases_by), as " name=n" pairs.
std::string counts_line(const fuzz::CampaignReport& r, const char* by);

// What both levels print of a finding's shrink: no smaller case reproduced; the time bound hit.
void print_not_shrunk(std::int32_t candidates_tried);
void print_shrink_timed_out(const fuzz::CampaignOptions& c);

void print_engine_summary(const fuzz::CampaignOptions& c, const fuzz::CampaignReport& r,
                          const fuzz::EngineLevel& level);
void print_engine_finding(const fuzz::CampaignOptions& c, const fuzz::Finding& f);

// The runner or scheduler mutant `info` (an entry of gpu::mutant_catalogue() above the kernel
// level) as a `mutants` job: the engine-level fuzz against it.
fuzz::MutantJob runner_mutant_job(const gpu::MutantInfo& info);

} // namespace mc::cli
