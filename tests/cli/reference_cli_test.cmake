# `--reference` (oracle/engine/structures.h): the same workloads on the oracle's fast and plain
# structures give the same counters (steps, request-steps, tokens, finished, preemptions, prefix
# hits, launches, copy decisions by kind, bytes checked and compared), the same bench JSON once
# timings are taken out, and byte-equal traces from `run --record`. The workloads preempt, hit
# cached prefixes, reset the cache and abort, so that every structure is exercised.
include("${CMAKE_CURRENT_LIST_DIR}/run_mambacheck.cmake")

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# Output lines without timings (wall, cpu, rates, run's seconds and steps/s) and without the line
# naming the structures.
function(counters text out_var)
  string(REPLACE ", reference structures" "" text "${text}")
  string(REGEX REPLACE "\n  wall [^\n]*" "" text "${text}")
  string(REGEX REPLACE ", [0-9.]+ s, [0-9.]+ steps/s" "" text "${text}") # run's summary line
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

function(expect_match text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: expected '${regex}' in:\n${text}")
  endif()
endfunction()

function(compare_both name)
  run(0 ${ARGN} ${extra_fast})
  counters("${OUT}" fast)
  run(0 ${ARGN} --reference ${extra_plain})
  expect_match("${OUT}" "reference structures" "${name} --reference")
  counters("${OUT}" plain)
  if(NOT fast STREQUAL plain)
    message(FATAL_ERROR "${name}: the counters differ\n--- fast:\n${fast}\n--- reference:\n${plain}")
  endif()
  set(OUT "${fast}" PARENT_SCOPE)
endfunction()

# bench --engine: V1 and V2 with pools small enough to preempt; the JSON without its timings.
foreach(runner v1 v2)
  set(extra_fast --json ${WORK_DIR}/bench_${runner}_fast.json)
  set(extra_plain --json ${WORK_DIR}/bench_${runner}_plain.json)
  compare_both(bench_${runner} bench --engine --preset tiny-mamba2 --runner ${runner}
               --requests 300 --steps 2000 --pool-blocks 120)
  expect_match("${OUT}" "preemptions [1-9][0-9]*, prefix hits [1-9]" "bench ${runner}")
  foreach(side fast plain)
    file(READ ${WORK_DIR}/bench_${runner}_${side}.json json)
    foreach(timing wall_seconds cpu_seconds steps_per_second request_steps_per_second)
      string(JSON json REMOVE "${json}" 0 ${timing})
    endforeach()
    set(json_${side} "${json}")
  endforeach()
  if(NOT json_fast STREQUAL json_plain)
    message(FATAL_ERROR "bench ${runner}: JSON differs\n${json_fast}\n${json_plain}")
  endif()
endforeach()

# run --record: V1 with resets, V2 with aborts and async scheduling, all mode; byte-equal traces.
set(runs
    "resets|--preset tiny-mamba2 --pool-blocks 24 --resets-per-million 20000"
    "aborts|--preset tiny-gdn --pool-blocks 16 --runner v2 --aborts-per-million 20000 --async"
    "all|--preset tiny-gdn --pool-blocks 24 --mode all")
foreach(entry ${runs})
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 name)
  list(GET parts 1 options)
  separate_arguments(options)
  set(extra_fast --record ${WORK_DIR}/${name}_fast.jsonl)
  set(extra_plain --record ${WORK_DIR}/${name}_plain.jsonl)
  compare_both(run_${name} run --requests 200 --steps 1500 ${options})
  expect_match("${OUT}" "preemptions [1-9]" "run ${name}")
  expect_match("${OUT}" "held: oracle and host agree" "run ${name}")
  file(SHA256 ${WORK_DIR}/${name}_fast.jsonl fast_sum)
  file(SHA256 ${WORK_DIR}/${name}_plain.jsonl plain_sum)
  file(SIZE ${WORK_DIR}/${name}_fast.jsonl size)
  if(NOT fast_sum STREQUAL plain_sum OR size LESS 1000)
    message(FATAL_ERROR "run ${name}: the traces differ (or are empty: ${size} bytes)")
  endif()
endforeach()

run(2 bench --reference) # an engine option without --engine
