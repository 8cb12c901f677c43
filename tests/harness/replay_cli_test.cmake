# `mambacheck run --record`, `mambacheck replay` and `run --workload` end to end: a recorded run
# replays to the same result (exit 0, the same step count, a JSON report and JUnit XML), a runner
# mutant fails the replay (exit 1, the step and line named), bad traces and workloads are refused
# with the file, line and field (exit 2), cuda without a device is exit 3.
include("${CMAKE_CURRENT_LIST_DIR}/../cli/run_mambacheck.cmake")

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(trace ${WORK_DIR}/run.jsonl)
run(0 run --preset tiny-mamba2 --runner v2 --pool-blocks 12 --steps 120 --requests 24 --seed 5
    --record ${trace})
string(REGEX MATCH "steps ([0-9]+) \\(compared" m "${OUT}")
set(run_steps ${CMAKE_MATCH_1})
run(0 replay ${trace} --report ${WORK_DIR}/replay.json --junit ${WORK_DIR}/replay.xml)
expect_in("${OUT}" "held: ${run_steps} steps")
file(READ ${WORK_DIR}/replay.json report)
string(JSON result GET "${report}" result)
string(JSON steps GET "${report}" steps)
string(JSON runner GET "${report}" runner)
if(NOT result STREQUAL "held" OR NOT steps EQUAL run_steps OR NOT runner STREQUAL "v2")
  message(FATAL_ERROR "replay report: ${report}")
endif()
file(READ ${WORK_DIR}/replay.xml junit)
expect_in("${junit}" "failures=\"0\"")

# Coverage: the replay's report carries the counts;
# --require-coverage fails a run or replay that never reached a feature (exit 1, named).
string(JSON preemptions GET "${report}" coverage counts preemption)
string(JSON slot_reuse GET "${report}" coverage counts v2-slot-reuse)
if(preemptions LESS 1 OR slot_reuse LESS 1)
  message(FATAL_ERROR "replay coverage: ${report}")
endif()
run(0 replay ${trace} --require-coverage preemption,v2-slot-reuse)
run(1 replay ${trace} --require-coverage reset,preemption)
expect_in("${OUT}" "never reached required feature: reset\n")
run(1 run --preset tiny-mamba2 --steps 20 --requests 4 --require-coverage all-mode-decode)
expect_in("${OUT}" "held: oracle and host agree")
expect_in("${OUT}" "never reached required feature: all-mode-decode")
run(0 run --preset tiny-mamba2 --mode all --steps 40 --requests 4 --require-coverage all-mode-decode)
run_input_error(replay ${trace} --require-coverage nonsense)
run_input_error(run --require-coverage skipped-row) # a kernel-level feature

# A runner mutant: the replay names the step and the line of the first difference.
run(1 replay ${trace} --runner-mutant slot_reused_without_reset --report ${WORK_DIR}/bad.json)
expect_in("${OUT}" "MISMATCH at step")
expect_in("${OUT}" "(line ")
file(READ ${WORK_DIR}/bad.json report)
string(JSON result GET "${report}" result)
string(JSON line GET "${report}" stop_line)
if(NOT result STREQUAL "mismatch" OR line LESS 2)
  message(FATAL_ERROR "mutant report: ${report}")
endif()

# A kernel mutant through the engine runner: the DS scenario fails on its DS mutant.
run(1 replay ${SOURCE_DIR}/scenarios/library/e-ds-with-bias.jsonl --kernel-mutant ds_tail_ignores_bias)
expect_in("${OUT}" "MISMATCH at step")
run(2 replay ${trace} --kernel-mutant no_such_mutant)
# One --mutant for every level (the spellings above are its hidden aliases); a scheduler mutant
# changes the steps a scheduler sends, which a trace fixes.
run(1 replay ${SOURCE_DIR}/scenarios/library/e-ds-with-bias.jsonl --mutant ds_tail_ignores_bias)
expect_in("${OUT}" "MISMATCH at step")
run(2 replay ${trace} --mutant no_such_mutant)
expect_in("${ERR}" "--mutant: unknown mutant 'no_such_mutant'")
run(2 replay ${trace} --mutant ds_tail_ignores_bias --mutant conv_one_row_short)
expect_in("${ERR}" "--mutant: two kernel mutants")
run(2 replay ${trace} --mutant async_frees_visible_at_once)
expect_in("${ERR}" "is a scheduler mutant")

# Bad input: exit 2 with file:line: field.
file(READ ${trace} text)
string(REGEX REPLACE "\"num_scheduled_tokens\":([0-9]+)" "\"num_scheduled_tokens\":-\\1" broken
       "${text}")
file(WRITE ${WORK_DIR}/negative.jsonl "${broken}")
run(2 replay ${WORK_DIR}/negative.jsonl)
expect_in("${ERR}" "negative.jsonl:2: scheduled[0].num_scheduled_tokens:")
string(REGEX REPLACE "\"block_ids\":\\[\\[[0-9]+" "\"block_ids\":[[99" broken "${text}")
file(WRITE ${WORK_DIR}/pool.jsonl "${broken}")
run(2 replay ${WORK_DIR}/pool.jsonl)
expect_in("${ERR}" "pool.jsonl:2: new_requests[0].block_ids[0][0]: block id 99 is outside")
run(2 replay ${WORK_DIR}/missing.jsonl)
run(2 replay ${trace} --runner-mutant no_such_mutant)
expect_in("${ERR}" "--runner-mutant: unknown mutant 'no_such_mutant'")
run(2 replay)
run(3 replay ${trace} --backend cuda)

# Workloads: the example runs and records; a malformed line is exit 2 with its number.
run(0 run --preset tiny-mamba2 --workload ${SOURCE_DIR}/scenarios/workloads/mooncake-style-small.jsonl
    --hash-block-tokens 8 --steps 500 --record ${WORK_DIR}/workload.jsonl)
expect_in("${OUT}" "requests 8 (finished 8")
run(0 replay ${WORK_DIR}/workload.jsonl)
file(WRITE ${WORK_DIR}/bad_workload.jsonl
     "{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 2}\n{\"timestamp\": 5, \"input_length\": 0, \"output_length\": 2}\n")
run(2 run --preset tiny-mamba2 --workload ${WORK_DIR}/bad_workload.jsonl)
expect_in("${ERR}" "bad_workload.jsonl:2: input_length: 0 is outside")

# Block sizes at both ends of FORMAT.md's range (1 and 65536) and a production one with drafts
# record and replay: a replay checks what the engine model can run, never the token budget of a
# scheduler (steps are given).
foreach(B 1 560 65536)
  set(spec 0)
  if(B EQUAL 560)
    set(spec 3)
  endif()
  run(0 run --preset tiny-mamba2 --block-size ${B} --num-spec ${spec} --requests 3 --steps 12
      --record ${WORK_DIR}/b${B}.jsonl)
  run(0 replay ${WORK_DIR}/b${B}.jsonl)
  expect_in("${OUT}" "held:")
endforeach()
# A geometry the engine cannot run is named by file, line and config field.
file(READ ${WORK_DIR}/b560.jsonl text)
string(REPLACE "\"mamba_block_size\":560" "\"mamba_block_size\":2" broken "${text}")
file(WRITE ${WORK_DIR}/spec_past_block.jsonl "${broken}")
run_input_error(replay ${WORK_DIR}/spec_past_block.jsonl)
expect_in("${ERR}" "spec_past_block.jsonl:1: config.num_spec_tokens: 3 must be below")
run_input_error(run --preset tiny-mamba2 --block-size 8 --token-budget 5)
expect_in("${ERR}" "token_budget 5 must be at least 8")
run_input_error(run --preset tiny-mamba2 --block-size -1)
run_input_error(run --preset tiny-mamba2 --block-size 70000)

# --steps-out writes one JSON line per step; --explain prints one step as a table; a step that
# never ran and an unwritable --steps-out are exit 2 (the latter before any work).
run(0 replay ${WORK_DIR}/b560.jsonl --steps-out ${WORK_DIR}/b560.steps.jsonl --explain 0)
expect_in("${OUT}" "step 0: ")
expect_in("${OUT}" "pre-copy")
file(STRINGS ${WORK_DIR}/b560.steps.jsonl step_lines)
list(LENGTH step_lines step_count)
string(REGEX MATCH "held: ([0-9]+) steps" m "${OUT}")
if(NOT step_count EQUAL CMAKE_MATCH_1)
  message(FATAL_ERROR "--steps-out wrote ${step_count} lines for ${CMAKE_MATCH_1} steps")
endif()
list(GET step_lines 0 first)
string(JSON row0 GET "${first}" rows 0)
string(JSON scheduled GET "${row0}" scheduled)
string(JSON hit GET "${row0}" prefix_hit_tokens)
if(NOT scheduled GREATER 0 OR NOT hit EQUAL 0)
  message(FATAL_ERROR "step 0 view: ${first}")
endif()
run_input_error(replay ${WORK_DIR}/b560.jsonl --explain 999999)
expect_in("${ERR}" "--explain: no step 999999")
run_input_error(replay ${WORK_DIR}/b560.jsonl --steps-out ${WORK_DIR}/no/such/dir/steps.jsonl)
expect_in("${ERR}" "--steps-out: cannot write")
run(0 run --preset tiny-mamba2 --steps 30 --requests 4 --steps-out ${WORK_DIR}/run.steps.jsonl)
file(STRINGS ${WORK_DIR}/run.steps.jsonl run_lines)
list(LENGTH run_lines run_count)
if(run_count LESS 1)
  message(FATAL_ERROR "run --steps-out wrote nothing")
endif()

# run --pad-tails sends a prompt's last token alone with placeholder drafts (vLLM's
# pad_spec_decode) and holds; without it no tail is padded, and requiring the feature fails.
run(0 run --preset tiny-mamba2 --steps 400 --requests 16 --pad-tails
    --require-coverage padded-prompt-tail)
run(1 run --preset tiny-mamba2 --steps 400 --requests 16 --require-coverage padded-prompt-tail)
expect_in("${OUT}" "never reached required feature: padded-prompt-tail")

# Scripted scenarios: both worked examples of docs/scenarios.md expand, replay and hold with
# their expectations; a wrong destination column is exit 1 naming step, request and field; a
# malformed scenario is exit 2 naming the file and the field.
foreach(example b560-chunked-prefill-decode b560-prefix-hit-v2)
  run(0 scenario ${SOURCE_DIR}/scenarios/examples/${example}.json
      --out ${WORK_DIR}/${example}.jsonl --steps-out ${WORK_DIR}/${example}.steps.jsonl)
  expect_in("${OUT}" "expectations held")
  run(0 replay ${WORK_DIR}/${example}.jsonl)
endforeach()
file(READ ${SOURCE_DIR}/scenarios/examples/b560-chunked-prefill-decode.json text)
string(REPLACE "\"pre_copy\": [4, 9]" "\"pre_copy\": [4, 10]" broken "${text}")
file(WRITE ${WORK_DIR}/wrong-dst.json "${broken}")
run(1 scenario ${WORK_DIR}/wrong-dst.json --out ${WORK_DIR}/wrong-dst.jsonl)
expect_in("${OUT}" "EXPECTATION at step 1 (line 3): request a: expect.pre_copy: the trace expects [4, 10], the oracle has [4, 9]")
string(REPLACE "\"token_budget\": 2800" "\"token_budgets\": 2800" broken "${text}")
file(WRITE ${WORK_DIR}/bad-field.json "${broken}")
run_input_error(scenario ${WORK_DIR}/bad-field.json)
expect_in("${ERR}" "bad-field.json: token_budgets: unknown field")
string(REPLACE "\"step\": 188" "\"step\": 9999" broken "${text}")
file(WRITE ${WORK_DIR}/late.json "${broken}")
run_input_error(scenario ${WORK_DIR}/late.json)
expect_in("${ERR}" "late.json: expect[4].step: step 9999 never ran")
run_input_error(scenario ${WORK_DIR}/no-such-scenario.json)

# All mode with 3 drafts at B = 4, vLLM's numbers (#41233): after a 6-token prefill the next
# step anchors at the fallback (6 - 1) // 4 = 1; after a full decode that accepted 2 at its
# record (6 + 4 - 1) // 4 = 2, where the fallback would give (8 - 1) // 4 = 1. Its
# expectations hold; an anchor at the fallback fails naming step, field and both values; the
# runner mutant that records after the prefill too reads a column past the state.
# Two of vLLM's own e2e prefix-cache tables (test_mamba_prefix_cache.py, accept_1 and
# accept_2_1: B = 560, 3 drafts, a 554-token prompt, 1 or 2 tokens accepted per decode), stated
# in vLLM's words: the scheduler's table (kv_block_mask), the copies with the bias in the source
# column, the token bias. All 51 hold on V1 with either copy path and on V2; a wrong mask and a
# copy stated without the bias fail, each naming step, line, request and field.
set(vllm vllm-b560-accept-1-and-2)
run(0 scenario ${SOURCE_DIR}/scenarios/examples/${vllm}.json --out ${WORK_DIR}/${vllm}.jsonl)
expect_in("${OUT}" "51 expectations held")
foreach(variant "--v1-copy;batch_copy" "--runner;v2")
  run(0 replay ${WORK_DIR}/${vllm}.jsonl ${variant})
  expect_in("${OUT}" "51 expectations held")
endforeach()
file(READ ${SOURCE_DIR}/scenarios/examples/${vllm}.json text)
string(REPLACE "\"step\": 8, \"request\": \"a\", \"kv_block_mask\": [[0, 1, 1, 1, 1]]"
               "\"step\": 8, \"request\": \"a\", \"kv_block_mask\": [[1, 1, 1, 1, 1]]" broken "${text}")
string(REPLACE "\"preprocess_copy_idx\": [1, 1]" "\"preprocess_copy_idx\": [0, 1]" broken "${broken}")
file(WRITE ${WORK_DIR}/vllm-broken.json "${broken}")
run(1 scenario ${WORK_DIR}/vllm-broken.json --out ${WORK_DIR}/vllm-broken.jsonl)
expect_in("${OUT}" "EXPECTATION at step 8 (line 10): request a: expect.kv_block_mask: the trace expects [11111], the oracle has [01111]")
expect_in("${OUT}" "EXPECTATION at step 43 (line 45): request b: expect.preprocess_copy_idx: the trace expects [0, 1], the oracle has [1, 1]")
expect_in("${OUT}" "2 of 51 expectations failed")

set(anchor b4-all-mode-anchor)
run(0 scenario ${SOURCE_DIR}/scenarios/examples/${anchor}.json --out ${WORK_DIR}/${anchor}.jsonl)
expect_in("${OUT}" "11 expectations held")
run(1 replay ${WORK_DIR}/${anchor}.jsonl --mutant all_record_after_any_step)
expect_in("${OUT}" "MISMATCH at step 1 (line 3)")
file(READ ${SOURCE_DIR}/scenarios/examples/${anchor}.json text)
string(REPLACE "\"step\": 1, \"request\": \"a\", \"prev_step_anchor\": 2"
               "\"step\": 1, \"request\": \"a\", \"prev_step_anchor\": 1" broken "${text}")
file(WRITE ${WORK_DIR}/anchor-fallback.json "${broken}")
run(1 scenario ${WORK_DIR}/anchor-fallback.json --out ${WORK_DIR}/anchor-fallback.jsonl)
expect_in("${OUT}" "EXPECTATION at step 1 (line 3): request a: expect.prev_step_anchor: the trace expects 1, the oracle has 2")

# vLLM's shape of a production trace: B = 560, 3 drafts, an EAGLE drafter, a 5600-token prompt
# prefilled in chunks of 2800, 2240 and 560 (the second stops a block short of the prompt's
# end), then decodes accepting 3 every step. Its expectations hold for V1 on both copy paths
# and for V2; the steps show the three chunks.
set(eagle b560-eagle-prefill-2800-2240-560)
run(0 scenario ${SOURCE_DIR}/scenarios/examples/${eagle}.json --out ${WORK_DIR}/${eagle}.jsonl
    --steps-out ${WORK_DIR}/${eagle}.steps.jsonl)
expect_in("${OUT}" "19 expectations held")
foreach(variant "--v1-copy;batch_copy" "--runner;v2")
  run(0 replay ${WORK_DIR}/${eagle}.jsonl ${variant})
  expect_in("${OUT}" "19 expectations held")
endforeach()
file(STRINGS ${WORK_DIR}/${eagle}.steps.jsonl eagle_steps)
set(chunk_index 0)
foreach(chunk 2800 2240 560)
  list(GET eagle_steps ${chunk_index} line)
  expect_in("${line}" "\"scheduled\":${chunk},\"drafts\":0")
  math(EXPR chunk_index "${chunk_index} + 1")
endforeach()
list(GET eagle_steps 3 line)
expect_in("${line}" "\"scheduled\":4,\"drafts\":3,\"accepted\":3")
file(READ ${SOURCE_DIR}/scenarios/examples/${eagle}.json text)
string(REPLACE "\"pre_copy\": [4, 8]" "\"pre_copy\": [4, 9]" broken "${text}")
file(WRITE ${WORK_DIR}/eagle-wrong-dst.json "${broken}")
run(1 scenario ${WORK_DIR}/eagle-wrong-dst.json --out ${WORK_DIR}/eagle-wrong-dst.jsonl)
expect_in("${OUT}" "EXPECTATION at step 1 (line 3): request a: expect.pre_copy: the trace expects [4, 9], the oracle has [4, 8]")
# A failed expectation does not stop the replay: every one is checked, and each that fails is
# listed with its step and line (two here, of the 19).
string(REPLACE "\"state_col\": 9," "\"state_col\": 10," broken "${broken}")
file(WRITE ${WORK_DIR}/eagle-two-wrong.json "${broken}")
run(1 scenario ${WORK_DIR}/eagle-two-wrong.json --out ${WORK_DIR}/eagle-two-wrong.jsonl
    --report ${WORK_DIR}/eagle-two-wrong.report.json)
expect_in("${OUT}" "EXPECTATION at step 1 (line 3): request a: expect.pre_copy: the trace expects [4, 9], the oracle has [4, 8]\nEXPECTATION at step 2 (line 4): request a: expect.state_col: the trace expects 10, the oracle has 9\n2 of 19 expectations failed\n")
expect_in("${OUT}" "steps 203 (compared 203)") # the whole trace ran
file(READ ${WORK_DIR}/eagle-two-wrong.report.json report)
string(JSON failed LENGTH "${report}" expectations_failed)
string(JSON second_line GET "${report}" expectations_failed 1 line)
string(JSON result GET "${report}" result)
if(NOT failed EQUAL 2 OR NOT second_line EQUAL 4 OR NOT result STREQUAL "expectation")
  message(FATAL_ERROR "two failed expectations, report: ${report}")
endif()
# No copy is null here and [-1, -1] in vLLM's tests: both read as no copy; half of it is refused.
string(REPLACE "\"pre_copy\": null, \"state_col\": 4" "\"pre_copy\": [-1, -1], \"state_col\": 4"
       vllm_style "${text}")
file(WRITE ${WORK_DIR}/eagle-vllm-no-copy.json "${vllm_style}")
run(0 scenario ${WORK_DIR}/eagle-vllm-no-copy.json --out ${WORK_DIR}/eagle-vllm-no-copy.jsonl)
expect_in("${OUT}" "19 expectations held")
string(REPLACE "\"pre_copy\": null, \"state_col\": 4" "\"pre_copy\": [-1, 4], \"state_col\": 4"
       half "${text}")
file(WRITE ${WORK_DIR}/eagle-half-copy.json "${half}")
run_input_error(scenario ${WORK_DIR}/eagle-half-copy.json)
expect_in("${ERR}" "expected [src_col, dst_col], [-1, -1] or null")

# A production preset cut to 2 layers records its groups inline (they are no longer the
# preset's) and replays at B = 560.
run(0 run --preset nemotron-h-8b --layers 2 --block-size 560 --steps 40
    --record ${WORK_DIR}/cut-layers.jsonl)
file(STRINGS ${WORK_DIR}/cut-layers.jsonl cut_header LIMIT_COUNT 1)
expect_in("${cut_header}" "\"num_layers\":2")
run(0 replay ${WORK_DIR}/cut-layers.jsonl)
expect_in("${OUT}" "oracle and backend agree on every step")
# Its 281 MB of arenas are past the whole-every-step bound: each step compares the blocks it
# wrote, and every byte every N steps and after the last step (steps 7, 15 and 39 here).
expect_in("${OUT}" "(the blocks each step wrote, whole arenas every 64 steps and after the last (1 times))")
run(0 replay ${WORK_DIR}/cut-layers.jsonl --whole-compare-every 8 --steps 20)
expect_in("${OUT}" "whole arenas every 8 steps and after the last (3 times))")
run(0 replay ${WORK_DIR}/cut-layers.jsonl --whole-compare-every 1 --steps 3)
expect_in("${OUT}" "(whole arenas after every step)")
run(2 replay ${WORK_DIR}/cut-layers.jsonl --whole-compare-every 0)
expect_in("${ERR}" "--whole-compare-every must be at least 1, got 0")

# --layers cuts a trace's depth for a quick look: the same steps and verdict on fewer bytes (one
# of the two layers of every group: exactly half of what the whole replay compared).
run(0 replay ${WORK_DIR}/cut-layers.jsonl --report ${WORK_DIR}/whole-depth.json)
string(REGEX MATCH "bytes compared ([0-9]+)" m "${OUT}")
set(whole_bytes ${CMAKE_MATCH_1})
run(0 replay ${WORK_DIR}/cut-layers.jsonl --layers 1 --report ${WORK_DIR}/one-layer.json)
expect_in("${OUT}" "backend host, at most 1 of the trace's 2 layers per group)")
expect_in("${OUT}" "held: 40 steps")
string(REGEX MATCH "bytes compared ([0-9]+)" m "${OUT}")
math(EXPR half "${whole_bytes} / 2")
if(NOT CMAKE_MATCH_1 EQUAL half)
  message(FATAL_ERROR "--layers 1 compared ${CMAKE_MATCH_1} bytes, expected ${half}")
endif()
file(READ ${WORK_DIR}/one-layer.json report)
string(JSON layers_max GET "${report}" layers_max)
string(JSON trace_layers GET "${report}" trace_layers)
if(NOT layers_max EQUAL 1 OR NOT trace_layers EQUAL 2)
  message(FATAL_ERROR "--layers 1 report: ${report}")
endif()
# Deeper than the trace changes nothing; a runner mutant is caught at the same step either way.
run(0 replay ${WORK_DIR}/cut-layers.jsonl --layers 8)
expect_in("${OUT}" "(runner v1, mode align, backend host)\n")
run(1 replay ${WORK_DIR}/cut-layers.jsonl --mutant curr_floor_division)
string(REGEX MATCH "MISMATCH at step [0-9]+ \\(line [0-9]+\\)" whole_mismatch "${OUT}")
run(1 replay ${WORK_DIR}/cut-layers.jsonl --mutant curr_floor_division --layers 1)
expect_in("${OUT}" "${whole_mismatch}")
run_input_error(replay ${WORK_DIR}/cut-layers.jsonl --layers -1)
expect_in("${ERR}" "--layers: expected a whole number from 0 up, got '-1'")
run_input_error(replay ${WORK_DIR}/cut-layers.jsonl --layers 1025)
expect_in("${ERR}" "--layers must be in 1..1024, got 1025")
run(0 scenario ${SOURCE_DIR}/scenarios/examples/${eagle}.json --out ${WORK_DIR}/eagle-1.jsonl
    --layers 1)
