# `mambacheck mutants --only a,b` kills both and writes its reports; `mutants --list` prints
# the catalogue of both levels; `fuzz --mutant` says the backend is mutated and finds a
# mismatch; bad names exit 2; `gate` with short options passes.
include("${CMAKE_CURRENT_LIST_DIR}/run_mambacheck.cmake")

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
run(0 mutants --backend host --level kernel --only null_block_skipped,precopy_ignores_token_bias
    --time-budget-per-mutant 60s --out ${WORK_DIR}/mutants --report ${WORK_DIR}/mutants.json
    --junit ${WORK_DIR}/mutants.xml)
if(NOT OUT MATCHES "2 of 2 killed")
  message(FATAL_ERROR "mutants table:\n${OUT}")
endif()
file(READ ${WORK_DIR}/mutants.json report)
string(JSON killed GET "${report}" killed)
string(JSON first GET "${report}" outcomes 0 name)
if(NOT killed EQUAL 2 OR NOT first STREQUAL "null_block_skipped")
  message(FATAL_ERROR "mutants report: killed ${killed}, first ${first}")
endif()
if(NOT EXISTS ${WORK_DIR}/mutants/null_block_skipped)
  message(FATAL_ERROR "no counterexample under ${WORK_DIR}/mutants/null_block_skipped")
endif()
file(READ ${WORK_DIR}/mutants.xml junit)
if(NOT junit MATCHES "failures=\"0\"")
  message(FATAL_ERROR "junit:\n${junit}")
endif()

run(0 mutants --list)
if(NOT OUT MATCHES "precopy_guard_by_address +kernel +D +precopy skips a row"
   OR NOT OUT MATCHES "all_boundary_count_from_length +engine +H +all mode counts"
   OR NOT OUT MATCHES "all_record_after_any_step +engine +A +all mode's postprocess records"
   OR NOT OUT MATCHES "table_row_from_slot +kernel +X +\\[out of bounds\\] V2 kinds"
   OR NOT OUT MATCHES "prefix_hit_one_block_short +engine +C +a new or resumed request"
   OR NOT OUT MATCHES "spec_blocks_left_behind +engine +X +when the running block advances"
   OR NOT OUT MATCHES "async_frees_visible_at_once +engine +X +with async scheduling the block pool")
  message(FATAL_ERROR "mutants --list:\n${OUT}")
endif()

# A scheduler mutant: the engine campaign kills it with the finding of the rule it breaks, and
# the saved trace replays, with no mutant, to the same finding at the same step.
run(1 fuzz --level engine --backend host --mutant prefix_hit_one_block_short --seed 1 --cases 20
    --max-size 60 --out ${WORK_DIR}/scheduler)
if(NOT OUT MATCHES "finding:wrong_prefix_hit"
   OR NOT OUT MATCHES "shrunk to 2 steps, 2 requests"
   OR NOT OUT MATCHES "reproduce: mambacheck fuzz --level engine --backend host --seed 8 --cases 1 --max-size 60 --mutant prefix_hit_one_block_short")
  message(FATAL_ERROR "fuzz --mutant prefix_hit_one_block_short:\n${OUT}")
endif()
run(1 replay ${WORK_DIR}/scheduler/engine-seed8/trace.jsonl --backend host)
if(NOT OUT MATCHES "FINDING at step 1 \\(line 3\\): wrong_prefix_hit: step 1, request r1: takes a prefix hit of 0 tokens")
  message(FATAL_ERROR "replay of the scheduler mutant's trace:\n${OUT}")
endif()
# With async scheduling: a pool whose frees are visible at once hands out a block the step in
# flight can still touch (r0 finished while its row was in flight; r1 gets its block); the
# trace (version 3) replays to the same finding.
run(1 fuzz --level engine --backend host --mutant async_frees_visible_at_once --seed 40
    --cases 20 --max-size 60 --out ${WORK_DIR}/async)
if(NOT OUT MATCHES "finding:in_flight_block_reused"
   OR NOT OUT MATCHES "shrunk to 2 steps, 2 requests"
   OR NOT OUT MATCHES "reproduce: mambacheck fuzz --level engine --backend host --seed 47 --cases 1 --max-size 60 --mutant async_frees_visible_at_once")
  message(FATAL_ERROR "fuzz --mutant async_frees_visible_at_once:\n${OUT}")
endif()
run(1 replay ${WORK_DIR}/async/engine-seed47/trace.jsonl --backend host)
if(NOT OUT MATCHES "FINDING at step 1 \\(line 3\\): in_flight_block_reused: step 1, request r1, column 0, block 1: block 1 of group 0 is handed out")
  message(FATAL_ERROR "replay of the async mutant's trace:\n${OUT}")
endif()
run_input_error(fuzz --level kernel --backend host --mutant spec_blocks_left_behind --cases 1)

# A mutant that reads and writes out of bounds is killed like any other (each case runs in a
# forked child on the host backend): the run survives it.
run(0 mutants --backend host --level kernel --only table_row_from_slot,null_block_skipped
    --time-budget-per-mutant 60s --out ${WORK_DIR}/oob)
if(NOT OUT MATCHES "2 of 2 killed")
  message(FATAL_ERROR "mutants with an out-of-bounds one:\n${OUT}")
endif()

run(1 fuzz --backend host --mutant conv_one_row_short --seed 1 --cases 50 --max-size 20
    --out ${WORK_DIR}/fuzz)
if(NOT OUT MATCHES "MUTATED kernels: conv_one_row_short" OR NOT OUT MATCHES "MISMATCH")
  message(FATAL_ERROR "fuzz --mutant:\n${OUT}")
endif()

run(2 fuzz --backend host --mutant no_such_mutant --cases 1)
run(2 mutants --backend host --only no_such_mutant)
run(2 mutants --backend host --time-budget-per-mutant 0s)
run(2 gate --backend host --mutant-budget forever)

# So few cases reach few features: the gate's default (every feature) would fail them, so this
# run names one feature each stage reaches; the run after it keeps the default and fails.
run(0 gate --backend host --kernel-cases 4 --engine-cases 1 --mutant-budget 60s
    --require-coverage copy,prefill-crosses-1 --out ${WORK_DIR}/gate --junit ${WORK_DIR}/gate.xml)
foreach(stage kernel-fuzz engine-fuzz library mutant-smoke)
  if(NOT OUT MATCHES "${stage}[^\n]*pass")
    message(FATAL_ERROR "gate stage ${stage}:\n${OUT}")
  endif()
endforeach()
file(READ ${WORK_DIR}/gate.xml junit)
if(NOT junit MATCHES "tests=\"4\"" OR NOT junit MATCHES "failures=\"0\"")
  message(FATAL_ERROR "gate junit:\n${junit}")
endif()
# One engine case a seed: the stage misses a feature even after its top-up and fails naming it.
# One kernel case a seed: the top-up, drawn toward each missing feature, still reaches them all.
run(1 gate --backend host --kernel-cases 1 --engine-cases 1 --mutant-budget 60s
    --out ${WORK_DIR}/gate-coverage)
if(NOT OUT MATCHES "engine-fuzz[^\n]*FAIL[^\n]*NEVER REACHED: ")
  message(FATAL_ERROR "gate, too few engine cases for its coverage:\n${OUT}")
endif()
if(NOT OUT MATCHES "kernel-fuzz[^\n]* pass [^\n]*coverage ([0-9]+) of ([0-9]+) features"
   OR NOT CMAKE_MATCH_1 EQUAL CMAKE_MATCH_2)
  message(FATAL_ERROR "gate, kernel top-up from one case a seed:\n${OUT}")
endif()
run_input_error(gate --backend host --require-coverage nonsense)
