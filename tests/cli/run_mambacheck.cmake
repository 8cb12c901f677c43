# Shared by the CLI tests (cmake -P scripts): run(EXPECTED_RC ARGS...) runs ${MAMBACHECK} ARGS,
# fails the test unless it exits EXPECTED_RC, and leaves its stdout in OUT and stderr in ERR.
# run_input_error(ARGS...) expects bad input: exit 2 and exactly one non-empty error line (OUT and
# ERR are set as run sets them). expect_in(TEXT PART) fails the test unless PART is in TEXT.
function(run expected_rc)
  execute_process(COMMAND ${MAMBACHECK} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL expected_rc)
    message(FATAL_ERROR "mambacheck ${ARGN}: exit ${rc}, expected ${expected_rc}\n${out}${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

function(run_input_error)
  run(2 ${ARGN})
  string(STRIP "${ERR}" err)
  string(FIND "${err}" "\n" newline)
  if(err STREQUAL "" OR NOT newline EQUAL -1)
    message(FATAL_ERROR "mambacheck ${ARGN}: expected one error line, got:\n${ERR}")
  endif()
  set(OUT "${OUT}" PARENT_SCOPE)
  set(ERR "${ERR}" PARENT_SCOPE)
endfunction()

function(expect_in text part)
  string(FIND "${text}" "${part}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${part}' in:\n${text}")
  endif()
endfunction()
