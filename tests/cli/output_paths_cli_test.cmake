# Every subcommand that writes checks its output paths before any work: a missing directory,
# a directory where a file goes, a file where a directory goes, or a place that cannot be
# created is one line naming the option, exit 2, and nothing run. A written report leaves no
# temporary file beside it.
include("${CMAKE_CURRENT_LIST_DIR}/run_mambacheck.cmake")

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/a-file "")
set(missing ${WORK_DIR}/no-such-dir/x)
set(trace ${SOURCE_DIR}/scenarios/library/a-decode-crossing-each-acceptance.jsonl)

run(0 export --cases 1 --out ${WORK_DIR}/case)

# OPTION|the arguments before the path it takes
set(writers
    "--report|fuzz --cases 100000 --report"
    "--junit|fuzz --cases 100000 --junit"
    "--out|fuzz --cases 100000 --out"
    "--out|export --cases 1000 --out"
    "--report|replay ${trace} --report"
    "--junit|replay ${trace} --junit"
    "--steps-out|replay ${trace} --steps-out"
    "--record|run --steps 100000 --record"
    "--steps-out|run --steps 100000 --steps-out"
    "--report|mutants --backend host --report"
    "--junit|mutants --backend host --junit"
    "--junit|gate --backend host --junit"
    "--out|gate --backend host --out"
    "--report|case ${WORK_DIR}/case/case-000000 --report"
    "--json|bench --engine --json")
foreach(writer IN LISTS writers)
  string(REPLACE "|" ";" pair "${writer}")
  list(GET pair 0 option)
  list(GET pair 1 command)
  separate_arguments(parts UNIX_COMMAND "${command}")
  if(option STREQUAL "--out")
    run_input_error(${parts} ${WORK_DIR}/a-file/sub) # a file where a directory goes
    expect_in("${ERR}" "is not a directory")
    run_input_error(${parts} /proc/mc-out) # a place nothing can be created
    expect_in("${ERR}" "--out: cannot create '/proc/mc-out'")
  else()
    run_input_error(${parts} ${missing})
    expect_in("${ERR}" "${option}: cannot")
    run_input_error(${parts} ${WORK_DIR}) # a directory where a file goes
    expect_in("${ERR}" "it is a directory")
  endif()
endforeach()

# show's --out is a file.
run_input_error(show ${trace} --out ${missing})
expect_in("${ERR}" "--out: cannot")
run_input_error(show ${trace} --out ${WORK_DIR})
expect_in("${ERR}" "it is a directory")

# A report is written whole, through a temporary renamed into place.
run(0 fuzz --backend host --cases 3 --report ${WORK_DIR}/r.json --junit ${WORK_DIR}/r.xml
    --out ${WORK_DIR}/mc-out)
file(GLOB temporaries ${WORK_DIR}/*.tmp-*)
if(temporaries)
  message(FATAL_ERROR "temporary files left: ${temporaries}")
endif()
file(READ ${WORK_DIR}/r.json report)
string(JSON cases GET "${report}" cases)
if(NOT cases EQUAL 3)
  message(FATAL_ERROR "report: ${cases} cases")
endif()
