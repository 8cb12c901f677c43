# `mambacheck run`: a short host run holds (exit 0, summary printed); bad options exit 2.
function(run expected_rc)
  execute_process(COMMAND ${MAMBACHECK} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL expected_rc)
    message(FATAL_ERROR "mambacheck ${ARGN}: exit ${rc}, expected ${expected_rc}\n${out}${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
endfunction()

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
