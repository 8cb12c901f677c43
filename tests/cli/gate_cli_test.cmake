# `gate --backend host --kernel-cases 20 --engine-cases 5` passes, every coverage feature of both
# levels reached. Its fixed kernel seeds run 20 cases each, at sizes 0..19, where the generator
# never makes a big offset (from size 50 on only): the top-up must draw toward the feature still
# missing (gen_steer.h: the big-offsets preset for offset-past-4GiB), not more of the same draw.
include("${CMAKE_CURRENT_LIST_DIR}/run_mambacheck.cmake")

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
run(0 gate --backend host --kernel-cases 20 --engine-cases 5 --out ${WORK_DIR}/gate)
foreach(stage kernel-fuzz engine-fuzz library mutant-smoke)
  if(NOT OUT MATCHES "\n  ${stage} [^\n]* pass ")
    message(FATAL_ERROR "gate stage ${stage} did not pass:\n${OUT}")
  endif()
endforeach()
foreach(stage kernel-fuzz engine-fuzz)
  if(NOT OUT MATCHES "\n  ${stage} [^\n]*coverage ([0-9]+) of ([0-9]+) features"
     OR NOT CMAKE_MATCH_1 EQUAL CMAKE_MATCH_2)
    message(FATAL_ERROR "gate stage ${stage}: not every feature reached:\n${OUT}")
  endif()
endforeach()
if(NOT OUT MATCHES "kernel-fuzz[^\n]*toward offset-past-4GiB \\(big-offsets\\)")
  message(FATAL_ERROR "gate: the kernel top-up was not drawn toward offset-past-4GiB:\n${OUT}")
endif()
