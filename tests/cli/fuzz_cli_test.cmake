# `mambacheck fuzz`: a short kernel-level campaign holds, its report is the same for the
# same seed, its JUnit file is written, and bad options exit 2.
include("${CMAKE_CURRENT_LIST_DIR}/run_mambacheck.cmake")

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
foreach(i 1 2)
  run(0 fuzz --backend host --seed 5 --cases 60 --max-size 35 --out ${WORK_DIR}/cx
      --report ${WORK_DIR}/report${i}.json --junit ${WORK_DIR}/junit.xml)
endforeach()
if(NOT OUT MATCHES "all cases held")
  message(FATAL_ERROR "campaign summary:\n${OUT}")
endif()
file(READ ${WORK_DIR}/report1.json r1)
file(READ ${WORK_DIR}/report2.json r2)
if(NOT r1 STREQUAL r2)
  message(FATAL_ERROR "same seed, different reports:\n${r1}\n${r2}")
endif()
string(JSON cases GET "${r1}" cases)
string(JSON result GET "${r1}" result)
if(NOT cases EQUAL 60 OR NOT result STREQUAL "held")
  message(FATAL_ERROR "report: cases ${cases}, result ${result}")
endif()
file(READ ${WORK_DIR}/junit.xml junit)
if(NOT junit MATCHES "failures=\"0\"")
  message(FATAL_ERROR "junit:\n${junit}")
endif()
run(2 fuzz --level nonsense)
run(2 fuzz --time-budget 5x)
run(2 fuzz --time-budget nan) # not a positive duration
run(2 fuzz --max-size 101)
run(2 fuzz --backend oracle)

# The engine level at a fixed production block size and budget holds, and says so in its report.
run(0 fuzz --level engine --backend host --seed 3 --cases 4 --max-size 20 --block-size 560
    --token-budget 1200 --report ${WORK_DIR}/engine560.json --out ${WORK_DIR}/cx)
file(READ ${WORK_DIR}/engine560.json r)
string(JSON block_size GET "${r}" block_size)
string(JSON held GET "${r}" held)
if(NOT block_size EQUAL 560 OR NOT held)
  message(FATAL_ERROR "engine report at B 560: ${r}")
endif()
run_input_error(fuzz --level engine --block-size 16 --token-budget 8)
run_input_error(fuzz --block-size 16) # kernel level: no block size to fix
run_input_error(fuzz --level engine --block-size abc)
