# `mambacheck fuzz`: a short kernel-level campaign holds, its report is the same for the
# same seed, its JUnit file is written, and bad options exit 2; with --keep-going a mutant's
# findings come one per signature, --skip-signature and --kinds select, `case --reruns` rates.
cmake_policy(SET CMP0054 NEW)
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
string(JSON held GET "${r1}" held)
if(NOT cases EQUAL 60 OR NOT held)
  message(FATAL_ERROR "report: cases ${cases}, held ${held}")
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

# --async: every engine case with async scheduling; the report says so, the coverage shows it.
run(0 fuzz --level engine --backend host --seed 3 --cases 12 --max-size 20 --async
    --report ${WORK_DIR}/engine_async.json --out ${WORK_DIR}/cx_async)
file(READ ${WORK_DIR}/engine_async.json r)
string(JSON async GET "${r}" async)
string(JSON deferral GET "${r}" coverage counts async-deferral)
if(NOT async OR deferral LESS 1)
  message(FATAL_ERROR "engine report with --async: ${r}")
endif()
run_input_error(fuzz --async) # kernel level: no steps to plan

# Keep going: a mutant that breaks same-block shifts fails in three of the seed's launch kinds;
# one campaign reports each kind's signature once (deterministic, every rerun failing), with its
# own counterexample, counts the repeats, and exits 1. Its report is the same for the same seed.
# The campaigns below draw the seed's five kinds (the draws of every earlier version).
set(SEED_KINDS --kinds postprocess,postprocess_align,precopy,preprocess_align,batch_copy)

# A shrink cut by its time bound says so (the report's counterexample, and a line), and the
# report records the bound; `--shrink-time none` leaves the candidate count as the only bound.
run(1 fuzz --backend host --mutant same_block_copy_skipped --seed 1 --cases 120 --max-size 40
    ${SEED_KINDS} --shrink-time 0.000001 --out ${WORK_DIR}/cut --report ${WORK_DIR}/cut.json)
file(READ ${WORK_DIR}/cut.json r)
string(JSON cut GET "${r}" findings 0 counterexample shrink_timed_out)
if(NOT cut OR NOT r MATCHES "\"seconds_max\": 1e-06" OR NOT OUT MATCHES "stopped at its time bound")
  message(FATAL_ERROR "a shrink cut by its time bound: ${r}\n${OUT}")
endif()

foreach(i 1 2)
  run(1 fuzz --backend host --mutant same_block_copy_skipped --keep-going --seed 1 --cases 120
      --max-size 40 ${SEED_KINDS} --shrink-time none --out ${WORK_DIR}/keep${i} --report ${WORK_DIR}/keep${i}.json
      --junit ${WORK_DIR}/keep${i}.xml)
endforeach()
file(READ ${WORK_DIR}/keep1.json k1)
file(READ ${WORK_DIR}/keep2.json k2)
string(REPLACE "keep1" "keep2" k1_as_2 "${k1}")
if(NOT k1_as_2 STREQUAL k2)
  message(FATAL_ERROR "keep-going: same seed, different reports:\n${k1}\n${k2}")
endif()
string(JSON cases GET "${k1}" cases)
string(JSON n LENGTH "${k1}" findings)
if(NOT cases EQUAL 120 OR NOT n EQUAL 3)
  message(FATAL_ERROR "keep-going: ${cases} cases, ${n} findings:\n${k1}")
endif()
set(counted 0)
foreach(i RANGE 2)
  string(JSON sig GET "${k1}" findings ${i} signature)
  string(JSON cls GET "${k1}" findings ${i} classification)
  string(JSON dir GET "${k1}" findings ${i} counterexample shrunk_dir)
  string(JSON n GET "${k1}" findings ${i} cases)
  string(JSON failed GET "${k1}" measured rates ${i} failed_runs)
  string(JSON runs GET "${k1}" measured rates ${i} runs)
  math(EXPR counted "${counted} + ${n}")
  if(NOT sig MATCHES "^kernel:(postprocess|postprocess_align|precopy):deterministic:state-bytes:same-block-shift$"
     OR NOT cls STREQUAL "deterministic" OR NOT failed EQUAL 6 OR NOT runs EQUAL 6
     OR NOT EXISTS ${dir}/case.json)
    message(FATAL_ERROR "keep-going finding ${i}: ${sig} ${cls} ${failed}/${runs} ${dir}")
  endif()
  set(sig${i} "${sig}")
endforeach()
string(JSON failing GET "${k1}" failing_cases)
if(NOT counted EQUAL failing OR failing LESS 4)
  message(FATAL_ERROR "keep-going: ${counted} counted of ${failing} failing cases")
endif()
file(READ ${WORK_DIR}/keep1.xml junit)
string(REGEX MATCHALL "<testcase " testcases "${junit}")
list(LENGTH testcases n)
if(NOT n EQUAL 3 OR NOT junit MATCHES "failures=\"3\"")
  message(FATAL_ERROR "keep-going junit: ${n} test cases:\n${junit}")
endif()

# The three signatures skipped: counted, not failing, exit 0; with two of them skipped the
# third still fails.
run(0 fuzz --backend host --mutant same_block_copy_skipped --keep-going --seed 1 --cases 120
    --max-size 40 ${SEED_KINDS} --out ${WORK_DIR}/skip --report ${WORK_DIR}/skip.json
    --skip-signature ${sig0} --skip-signature ${sig1} --skip-signature ${sig2})
file(READ ${WORK_DIR}/skip.json s)
string(JSON held GET "${s}" held)
string(JSON skipped GET "${s}" findings 0 skipped)
if(NOT held OR NOT skipped OR EXISTS ${WORK_DIR}/skip/kernel-seed17)
  message(FATAL_ERROR "skip-signature: ${s}")
endif()
run(1 fuzz --backend host --mutant same_block_copy_skipped --keep-going --seed 1 --cases 120
    --max-size 40 ${SEED_KINDS} --out ${WORK_DIR}/skip2 --skip-signature ${sig0}
    --skip-signature ${sig1})

# Without --keep-going the campaign stops at its first finding; --kinds draws only those kinds.
run(1 fuzz --backend host --mutant same_block_copy_skipped --seed 1 --cases 120 --max-size 40
    ${SEED_KINDS} --out ${WORK_DIR}/first --report ${WORK_DIR}/first.json)
file(READ ${WORK_DIR}/first.json f)
string(JSON n LENGTH "${f}" findings)
string(JSON first_seed GET "${k1}" findings 0 first_case_seed)
string(JSON cases GET "${f}" cases)
if(NOT n EQUAL 1 OR NOT cases EQUAL first_seed)
  message(FATAL_ERROR "stop at first: ${n} findings after ${cases} cases:\n${f}")
endif()
# The same mutant in the kinds of today's vLLM: V1's fused pre-copy and the per-slot tables,
# one signature each.
run(1 fuzz --backend host --mutant same_block_copy_skipped --keep-going --seed 1 --cases 60
    --max-size 40 --kinds precopy_v1,postprocess_align_slot_tables,precopy_slot_tables
    --out ${WORK_DIR}/today --report ${WORK_DIR}/today.json)
file(READ ${WORK_DIR}/today.json t)
string(JSON n LENGTH "${t}" findings)
set(today_kinds "")
foreach(i RANGE 2)
  string(JSON sig GET "${t}" findings ${i} signature)
  string(REGEX REPLACE "^kernel:([a-z_0-9]+):.*" "\\1" kind "${sig}")
  list(APPEND today_kinds ${kind})
endforeach()
list(SORT today_kinds)
if(NOT n EQUAL 3
   OR NOT today_kinds STREQUAL "postprocess_align_slot_tables;precopy_slot_tables;precopy_v1")
  message(FATAL_ERROR "--kinds of today's vLLM: ${n} findings (${today_kinds}):\n${t}")
endif()
run(0 fuzz --backend host --kinds precopy,batch_copy --seed 2 --cases 30 --max-size 30
    --report ${WORK_DIR}/kinds.json --out ${WORK_DIR}/cx)
file(READ ${WORK_DIR}/kinds.json r)
string(JSON kinds GET "${r}" cases_by_kind)
if(NOT kinds MATCHES "^{[^}]*\"batch_copy\" *: *[0-9]+,[^}]*\"precopy\" *: *[0-9]+[^,}]*}$")
  message(FATAL_ERROR "--kinds: ${kinds}")
endif()
run_input_error(fuzz --kinds nonsense)
run_input_error(fuzz --reruns -1)
run_input_error(fuzz --repeat 0)
run_input_error(fuzz --keep-going --stop-at-first)
run_input_error(fuzz --level engine --kinds precopy)

# `case --reruns`: the saved counterexample fails on every run.
string(JSON dir GET "${k1}" findings 0 counterexample shrunk_dir)
run(0 case ${dir} --backend host --check --reruns 4) # the clean kernels
if(NOT OUT MATCHES "failed 0 of 5 runs")
  message(FATAL_ERROR "case --reruns, clean kernels:\n${OUT}")
endif()
run(1 case ${dir} --backend host --mutant same_block_copy_skipped --check --reruns 4)
if(NOT OUT MATCHES "failed 5 of 5 runs \\(deterministic\\)")
  message(FATAL_ERROR "case --reruns:\n${OUT}")
endif()
run_input_error(case ${dir} --reruns 3)
run_input_error(case ${dir} --backend host --mutant nonsense --check)

# Coverage: the report carries it, the text prints its table; --require-coverage fails a run
# that never reached a feature (exit 1, naming it) and rejects an unknown name or a feature of
# a level that does not run (exit 2, one line).
run(0 fuzz --backend host --seed 5 --cases 20 --max-size 10 --out ${WORK_DIR}/cov
    --require-coverage launch-precopy,copy --report ${WORK_DIR}/cov.json)
if(NOT OUT MATCHES "coverage, kernel level: [0-9]+ of [0-9]+ features reached")
  message(FATAL_ERROR "coverage table:\n${OUT}")
endif()
file(READ ${WORK_DIR}/cov.json r)
string(JSON copies GET "${r}" coverage counts copy)
string(JSON missing LENGTH "${r}" coverage_missing)
if(copies LESS 1 OR NOT missing EQUAL 0)
  message(FATAL_ERROR "coverage in the report: ${r}")
endif()
run(1 fuzz --backend host --seed 5 --cases 20 --max-size 10 --out ${WORK_DIR}/cov
    --require-coverage copy,offset-past-4GiB --report ${WORK_DIR}/cov-missing.json)
if(NOT OUT MATCHES "never reached required feature: offset-past-4GiB\n" OR NOT OUT MATCHES "all cases held")
  message(FATAL_ERROR "--require-coverage, a feature never reached:\n${OUT}")
endif()
file(READ ${WORK_DIR}/cov-missing.json r)
string(JSON missing GET "${r}" coverage_missing 0)
if(NOT missing STREQUAL "offset-past-4GiB")
  message(FATAL_ERROR "coverage_missing: ${r}")
endif()
run_input_error(fuzz --backend host --cases 1 --require-coverage copy,preemptoin)
if(NOT ERR MATCHES "'preemptoin'" OR NOT ERR MATCHES "v2-slot-reuse")
  message(FATAL_ERROR "unknown feature: ${ERR}")
endif()
run_input_error(fuzz --backend host --cases 1 --require-coverage preemption) # engine level only
run(1 fuzz --level engine --backend host --seed 1 --cases 3 --max-size 3 --out ${WORK_DIR}/cov
    --require-coverage all)
if(NOT OUT MATCHES "coverage, engine level" OR NOT OUT MATCHES "COVERAGE: [^\n]*abort")
  message(FATAL_ERROR "--level engine --require-coverage all:\n${OUT}")
endif()
