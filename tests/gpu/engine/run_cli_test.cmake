# `mambacheck run`: a short host run holds (exit 0, summary printed); bad options exit 2.
include("${CMAKE_CURRENT_LIST_DIR}/../../cli/run_mambacheck.cmake")

run(0 run --preset tiny-mamba2 --steps 200 --requests 20 --seed 3 --backend host --runner v1
    --pool-blocks 24)
if(NOT OUT MATCHES "held" OR NOT OUT MATCHES "bytes compared")
  message(FATAL_ERROR "run printed no summary:\n${OUT}")
endif()
run(0 run --preset tiny-gdn --steps 150 --requests 16 --backend host --runner v2 --mode all)
run(2 run --preset no-such-preset --steps 10 --requests 4 --backend host)
run(2 run --preset tiny-mamba2 --steps -1 --requests 4 --backend host)
run(2 run --preset tiny-mamba2 --steps 10 --requests 4 --backend tpu)
run(2 run --preset tiny-mamba2 --steps 10 --requests 4 --runner v3)
run(2 run --preset tiny-mamba2 --steps 10 --requests 4 --pool-blocks 1)
# Drafts, resets, aborts and async scheduling from the command line.
run(0 run --preset tiny-mixed --num-spec 0 --steps 300 --requests 30 --backend host --runner v2
    --pool-blocks 16 --resets-per-million 20000 --aborts-per-million 20000 --async)
if(NOT OUT MATCHES "resets [1-9]" OR NOT OUT MATCHES "aborted [1-9]")
  message(FATAL_ERROR "run made no reset or no abort:\n${OUT}")
endif()
# Async with drafts: optimistic counts rolled back, frees held back for the step in flight.
run(0 run --preset tiny-mamba2 --async --steps 300 --requests 30 --pool-blocks 16
    --require-coverage async-deferral,async-rollback,async-held-free)
if(NOT OUT MATCHES "async-rollback +[1-9]" OR NOT OUT MATCHES "async-held-free +[1-9]")
  message(FATAL_ERROR "run --async:\n${OUT}")
endif()
# The old flag, whose deferral of every free by a step is gone, is refused naming the new one.
run(2 run --preset tiny-mamba2 --steps 10 --requests 4 --async-frees)
if(NOT ERR MATCHES "--async-frees is gone: --async runs async scheduling")
  message(FATAL_ERROR "run --async-frees:\n${ERR}")
endif()
# A preset whose conv group keeps no drafts runs without them unless drafts are asked for.
run(0 run --preset tiny-mixed --steps 10 --requests 4)
run(2 run --preset tiny-mixed --num-spec 2 --steps 10 --requests 4)
if(NOT ERR MATCHES "keeps no drafts in its conv window")
  message(FATAL_ERROR "the error names no reason:\n${ERR}")
endif()
run(2 run --preset tiny-mamba2 --num-spec 17 --steps 10 --requests 4)
# All mode with drafts: full decodes leave records that the next steps read at.
run(0 run --preset tiny-mamba2 --mode all --num-spec 2 --steps 200 --requests 16
    --require-coverage all-mode-record)
if(NOT OUT MATCHES "mode all" OR NOT OUT MATCHES "all-mode-record +[1-9]")
  message(FATAL_ERROR "run --mode all --num-spec 2:
${OUT}")
endif()
run(2 run --preset tiny-mamba2 --resets-per-million 1000001 --steps 10 --requests 4)
run(2 run --preset tiny-mamba2 --aborts-per-million -1 --steps 10 --requests 4)
