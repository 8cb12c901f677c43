# `mambacheck bench --engine` (bench/engine_bench.h) at tiny sizes: it runs in every build,
# prints every field, writes its JSON, and the counts of a seeded run are exact (the engine
# is deterministic for a seed: a change of these numbers is a change of the simulation).
# Bad options: one error line, exit 2.
include("${CMAKE_CURRENT_LIST_DIR}/run_mambacheck.cmake")

function(expect text)
  string(FIND "${OUT}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${text}' in:\n${OUT}")
  endif()
endfunction()

file(MAKE_DIRECTORY ${WORK_DIR})
set(json ${WORK_DIR}/bench.json)
file(REMOVE ${json})
run(0 bench --engine --preset tiny-mamba2 --steps 50 --requests 20 --json ${json})
expect("engine bench tiny-mamba2: runner v1, B 4, num_spec 2, 2 layers, pool 1600 blocks (256000 bytes of arenas)")
expect("workload: requests 20, max_running 256, token_budget 4096, prompts 1..40, outputs 1..200, steps at most 50, seed 1")
expect("steps 50, request-steps 710 (rows per step: mean 14.2, max 19), tokens 2258")
expect("finished 9, preemptions 0, prefix hits 1, launches 99, bytes checked by invariants 332320")
foreach(field "wall " " steps/s, " " request-steps/s; cpu ")
  expect("${field}")
endforeach()
file(READ ${json} report)
foreach(pair "steps;50" "request_steps;710" "bytes_checked;332320" "requests;20" "max_running;256"
             "token_budget;4096" "pool_blocks;1600" "num_spec;2" "finished;9")
  list(GET pair 0 key)
  list(GET pair 1 want)
  string(JSON got GET "${report}" 0 ${key})
  if(NOT got EQUAL want)
    message(FATAL_ERROR "bench.json: ${key} is ${got}, expected ${want}")
  endif()
endforeach()
string(JSON rate GET "${report}" 0 request_steps_per_second)
if(NOT rate GREATER 0)
  message(FATAL_ERROR "bench.json: request_steps_per_second ${rate}")
endif()

# A production-like preset cut to one layer (2 MiB temporal states), V2, a small pool.
run(0 bench --engine --preset nemotron-h-8b --layers 1 --steps 6 --requests 3 --max-running 2
    --pool-blocks 16 --runner v2)
expect("engine bench nemotron-h-8b: runner v2, B 256, num_spec 2, 1 layers, pool 16 blocks (35192832 bytes of arenas)")
expect("steps 6, request-steps 12 (rows per step: mean 2.0, max 2), tokens 1750")

foreach(bad "--steps;0" "--requests;0" "--requests;1;2" "--max-running;0" "--token-budget;2"
            "--pool-blocks;3" "--num-spec;17" "--num-spec;-1" "--num-spec;4" "--layers;3" "--runner;v3"
            "--preset;no-such-model" "--iters;3" "--preset;nemotron-h-8b;--layers;24;--pool-blocks;1000")
  run_input_error(bench --engine ${bad})
endforeach()
run(2 bench --steps 3) # an engine option without --engine

# The kernel bench's options are checked before it looks for a GPU (exit 2, not 3).
foreach(bad "--sets;0" "--sets;4" "--iters;0" "--requests;0" "--preset;no-such-model"
            "--engine;--sets;2")
  run_input_error(bench ${bad})
endforeach()

# `bench --cases`: kernel campaign cases timed phase by phase (bench/case_bench.h), in every build.
# The cases and the bytes of their arenas are the campaign's: exact for a seed.
file(REMOVE ${json})
run(0 bench --cases 40 --max-size 20 --seed 3 --json ${json})
expect("40 kernel cases (seed 3, sizes 0..20, backend host): ")
foreach(phase "draw the spec" "layout, arenas mapped and poisoned" "fill referenced blocks"
              "oracle" "backend" "compare" "verdict (signature, coverage)"
              "release the case's memory" "verdict to JSON and back (IPC)")
  expect("  ${phase} ")
endforeach()
file(READ ${json} report)
string(JSON cases GET "${report}" cases)
string(JSON failed GET "${report}" failed)
string(JSON bytes GET "${report}" arena_bytes)
if(NOT cases EQUAL 40 OR NOT failed EQUAL 0 OR NOT bytes EQUAL 62842468)
  message(FATAL_ERROR "bench --cases: cases ${cases}, failed ${failed}, arena bytes ${bytes}")
endif()
foreach(bad "--cases;0" "--cases;5;--max-size;101" "--cases;5;--backend;oracle"
            "--cases;5;--engine")
  run_input_error(bench ${bad})
endforeach()
run(2 bench --max-size 3) # a --cases option without --cases
run(2 bench --seed 3)     # a seed of neither bench
