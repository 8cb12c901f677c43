# The install test (ctest install.fresh_clone, label install): what a new user does with a
# release, checked end to end.
#   1. git clone the committed tree of SOURCE_DIR into WORK_DIR/src;
#   2. configure it as the build under test is configured (BUILD_TYPE and its flags,
#      SANITIZE, WERROR; no CUDA, no tests) in the same place relative to its source
#      (src/BUILD_SUBDIR), build only the mambacheck binary (and so the two exported
#      libraries), cmake --install to WORK_DIR/prefix.
#      Same flags and the same relative paths: with CCACHE (base_dir the clone, directories not
#      hashed) every object is a hit from the build under test when that build used ccache too,
#      so this costs a link, not a second build;
#   3. rename the clone (WORK_DIR/src.moved), so nothing can come from the source tree;
#   4. from another directory: the installed binary's gate on the host backend (small campaigns)
#      passes and replays the library installed under the prefix; a copy of the binary with no
#      data next to it exits 3 naming both places it looked (the installed one, the source one);
#   5. a consumer project (tests/install/consumer) find_package's the prefix, reads and rewrites
#      a case the installed binary exported and a trace of the installed library (compiled and
#      linked with CONSUMER_FLAGS: a sanitized build's libraries need the sanitizers' runtime);
#   6. the Python package installs from the prefix, offline, into a virtual environment, and its
#      console entry point serves fuzz --external. A PYTHON without numpy, pip, setuptools >= 61
#      or wheel fails the test (scripts/setup installs them from Debian): never a pass that
#      checked less.
# cmake -DSOURCE_DIR=... -DWORK_DIR=... [-DBUILD_TYPE=Release] [-DBUILD_TYPE_FLAGS="-O3"] [-DSANITIZE=OFF] [-DWERROR=OFF]
#       [-DBUILD_SUBDIR=build] [-DCONSUMER_FLAGS=...] [-DPYTHON=python3] [-DCCACHE=ccache]
#       [-DJOBS=2] -P this
# Prints "install test skipped: ..." (ctest: skipped) when SOURCE_DIR is not a git checkout.
cmake_minimum_required(VERSION 3.25)
foreach(var SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_test.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT DEFINED JOBS)
  set(JOBS 2)
endif()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()
if(NOT BUILD_SUBDIR)
  set(BUILD_SUBDIR build)
endif()

# step(NAME COMMAND...): runs COMMAND in WORK_DIR/run unless WORKING_DIRECTORY comes first; fails
# the test unless it exits 0. Leaves stdout in OUT, stderr in ERR, the exit code in RC.
function(step name)
  cmake_parse_arguments(ARG "ALLOW_FAILURE" "WORKING_DIRECTORY" "COMMAND" ${ARGN})
  if(NOT ARG_WORKING_DIRECTORY)
    set(ARG_WORKING_DIRECTORY ${WORK_DIR}/run)
  endif()
  string(TIMESTAMP start "%s")
  execute_process(COMMAND ${ARG_COMMAND} WORKING_DIRECTORY ${ARG_WORKING_DIRECTORY}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(TIMESTAMP end "%s")
  math(EXPR seconds "${end} - ${start}")
  message(STATUS "${name}: exit ${rc}, ${seconds} s")
  if(NOT ARG_ALLOW_FAILURE AND NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: exit ${rc}\n${ARG_COMMAND}\n${out}${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
  set(RC "${rc}" PARENT_SCOPE)
endfunction()

function(expect_match text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: no match for ${regex} in:\n${text}")
  endif()
endfunction()

find_program(GIT git)
if(NOT GIT)
  message("install test skipped: no git to clone ${SOURCE_DIR} with")
  return()
endif()
execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} rev-parse HEAD RESULT_VARIABLE rc
                OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rc EQUAL 0)
  message("install test skipped: ${SOURCE_DIR} is not a git checkout (nothing committed to clone)")
  return()
endif()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/run)
set(src ${WORK_DIR}/src)
set(build ${src}/${BUILD_SUBDIR})
set(prefix ${WORK_DIR}/prefix)
set(bin ${prefix}/bin/mambacheck)
set(data ${prefix}/share/mambacheck)

# 1-2. A clone of the committed tree, built and installed as a user would.
step("clone ${head}" COMMAND ${GIT} clone --quiet --no-hardlinks ${SOURCE_DIR} ${src})
string(TOUPPER "${BUILD_TYPE}" build_type_upper)
set(configure_args -S ${src} -B ${build} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
                   "-DCMAKE_CXX_FLAGS_${build_type_upper}=${BUILD_TYPE_FLAGS}" -DMC_SANITIZE=${SANITIZE}
                   -DMC_WERROR=${WERROR} -DMC_ENABLE_CUDA=OFF -DMC_BUILD_TESTS=OFF)
if(CCACHE)
  set(ENV{CCACHE_BASEDIR} ${src})
  set(ENV{CCACHE_NOHASHDIR} true)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CCACHE})
endif()
step(configure COMMAND ${CMAKE_COMMAND} ${configure_args})
step("build mambacheck" COMMAND ${CMAKE_COMMAND} --build ${build} --target mambacheck
                                --parallel ${JOBS})
step(install COMMAND ${CMAKE_COMMAND} --install ${build} --prefix ${prefix})

foreach(f bin/mambacheck include/mambacheck/model/case_file.h include/mambacheck/scenarios/trace.h
          share/mambacheck/scenarios/examples/b560-prefix-hit-v2.json
          share/mambacheck/scenarios/workloads/mooncake-style-small.jsonl
          share/mambacheck/model/examples/read_case.py
          share/mambacheck/python/pyproject.toml share/mambacheck/python/mambacheck_recorder.py
          share/mambacheck/python/mambacheck_adapter/worker.py
          share/doc/mambacheck/CASE_FORMAT.md share/doc/mambacheck/TRACE_FORMAT.md)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${prefix}/${f}")
  endif()
endforeach()
file(GLOB_RECURSE config_files ${prefix}/*/mambacheckConfig.cmake)
file(GLOB_RECURSE libraries ${prefix}/*/libmc_model.a ${prefix}/*/libmc_scenarios.a
     ${prefix}/*/libmc_fmt.a)
list(LENGTH config_files num_configs)
list(LENGTH libraries num_libraries)
if(NOT num_configs EQUAL 1 OR NOT num_libraries EQUAL 3)
  message(FATAL_ERROR "package config ${config_files}, libraries ${libraries}")
endif()
file(GLOB source_scenarios ${src}/scenarios/library/*.jsonl)
file(GLOB installed_scenarios ${data}/scenarios/library/*.jsonl)
list(LENGTH source_scenarios num_scenarios)
list(LENGTH installed_scenarios num_installed)
if(num_scenarios EQUAL 0 OR NOT num_installed EQUAL num_scenarios)
  message(FATAL_ERROR "${num_installed} scenarios installed of ${num_scenarios}")
endif()
# The consumer is another project: it is built from its own copy, outside the tree.
file(COPY ${src}/tests/install/consumer DESTINATION ${WORK_DIR})

# 3. No source tree any more: whatever the binary needs must come from the prefix.
file(RENAME ${src} ${WORK_DIR}/src.moved)

# 4. The gate from another directory. Few cases: the gate's coverage rule would fail campaigns
# this small, so two features stand for it (as in the CLI test of the gate).
step(version COMMAND ${bin} --version)
file(STRINGS ${WORK_DIR}/src.moved/CMakeLists.txt project_line REGEX "^project\\(mambacheck VERSION")
string(REGEX MATCH "VERSION ([0-9.]+)" _ "${project_line}")
set(version ${CMAKE_MATCH_1})
expect_match("${OUT}" "^mambacheck ${version}\n$" "--version")
step(gate COMMAND ${bin} gate --backend host --kernel-cases 4 --engine-cases 1 --mutant-budget 120s
                  --require-coverage copy,prefill-crosses-1 --out ${WORK_DIR}/run/gate
                  --junit ${WORK_DIR}/run/gate.xml)
message(STATUS "gate:\n${OUT}")
expect_match("${OUT}" "library +${num_scenarios} cases [^\n]* pass  ${num_scenarios} scenarios of ${data}/scenarios/library held"
             "the gate's library stage")
expect_match("${OUT}" "\ngate passed\n" "gate")
file(READ ${WORK_DIR}/run/gate.xml junit)
expect_match("${junit}" "tests=\"4\" failures=\"0\"" "gate JUnit")

# A binary with no data next to it, built from a tree that is gone: exit 3, one line naming both
# places (the installed copy was found above, so this shows the search does not stop at the
# source tree's path by accident).
file(COPY ${bin} DESTINATION ${WORK_DIR}/lonely/bin)
step("gate without data" ALLOW_FAILURE COMMAND ${WORK_DIR}/lonely/bin/mambacheck gate
     --backend host --kernel-cases 1 --engine-cases 1 --out ${WORK_DIR}/run/lonely)
set(expected_error "mambacheck: unavailable: no scenario library (--library DIR names one): not installed next to this binary (${WORK_DIR}/lonely/share/mambacheck/scenarios/library) and not in the source tree it was built from (${src}/scenarios/library)\n")
if(NOT RC EQUAL 3 OR NOT ERR STREQUAL expected_error)
  message(FATAL_ERROR "gate without data: exit ${RC}, expected 3 and\n${expected_error}got\n${ERR}")
endif()

# 5. A C++ consumer of the exported libraries: a case exported by the installed binary and a
# trace of the installed library, read, written back and read again.
# The last of seven cases: a postprocess_align launch of 4 rows over 7 slots, 2 arenas, 9 copies.
step(export COMMAND ${bin} export --cases 7 --seed 11 --max-size 30 --out ${WORK_DIR}/run/cases)
file(GLOB case_dirs LIST_DIRECTORIES true ${WORK_DIR}/run/cases/case-*)
list(SORT case_dirs)
list(GET case_dirs -1 case_dir)
list(SORT installed_scenarios)
list(GET installed_scenarios 0 trace)
step("configure consumer" COMMAND ${CMAKE_COMMAND} -S ${WORK_DIR}/consumer -B ${WORK_DIR}/consumer-build
     -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} "-DCMAKE_CXX_FLAGS=${CONSUMER_FLAGS}"
     "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_FLAGS}")
step("build consumer" COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer-build --parallel ${JOBS})
step(consumer COMMAND ${WORK_DIR}/consumer-build/mc_consumer ${case_dir} ${trace}
     ${WORK_DIR}/run/consumer)
message(STATUS "consumer:\n${OUT}")
file(READ ${case_dir}/case.json case_json)
string(JSON kind GET "${case_json}" launch kind)
string(JSON reqs GET "${case_json}" launch num_reqs)
string(JSON slots GET "${case_json}" launch num_slots)
string(JSON tensors LENGTH "${case_json}" layout tensors)
string(JSON arenas LENGTH "${case_json}" layout arenas)
file(READ ${case_dir}/expected/result.json result_json)
string(JSON decisions LENGTH "${result_json}" decisions)
expect_match("${OUT}" "^case ${kind} reqs=${reqs} slots=${slots} tensors=${tensors} arenas=${arenas} arena_bytes=[1-9][0-9]*\nresult ok decisions=${decisions}\ncase copy: equal\n"
             "consumer, case")
file(READ ${trace} trace_text)
string(REGEX MATCHALL "\n" newlines "${trace_text}")
list(LENGTH newlines lines)
math(EXPR steps "${lines} - 1")
string(REGEX MATCH "^[^\n]*" header "${trace_text}")
string(JSON preset GET "${header}" layout preset)
string(JSON trace_version GET "${header}" version)
expect_match("${OUT}" "\ntrace ${preset} version=${trace_version} steps=${steps} rows=[1-9][0-9]*\ntrace copy: equal\n$"
             "consumer, trace")
# The library's traces are the writer's own output: rewritten, byte for byte the same.
step("trace rewritten" COMMAND ${CMAKE_COMMAND} -E compare_files ${trace}
     ${WORK_DIR}/run/consumer/trace.jsonl)

# 6. The Python package from the prefix, offline, in a virtual environment over the system's
# packages (numpy, setuptools, wheel and pip from Debian).
set(python_packages "python3-numpy, python3-pip, python3-setuptools, python3-wheel and python3-venv")
if(NOT PYTHON)
  message(FATAL_ERROR "install test: no python3 with numpy for the Python part (scripts/setup "
                      "installs ${python_packages})")
endif()
# setuptools before pip: Debian's setuptools refuses to load after pip has imported distutils.
execute_process(COMMAND ${PYTHON} -c "import setuptools, wheel, pip\nassert int(setuptools.__version__.split('.')[0]) >= 61"
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install test: ${PYTHON} lacks pip, wheel or setuptools >= 61 for the Python "
                      "part (scripts/setup installs ${python_packages})")
endif()
set(venv ${WORK_DIR}/venv)
step(venv COMMAND ${PYTHON} -m venv --system-site-packages --without-pip ${venv})
# A PYTHON that is itself in a virtual environment gives the new one its base's packages only.
execute_process(COMMAND ${venv}/bin/python -c "import numpy, setuptools, wheel, pip"
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install test: a virtual environment over ${PYTHON} lacks numpy, pip, "
                      "setuptools or wheel: is ${PYTHON} in a virtual environment itself?")
endif()
step("pip install" COMMAND ${venv}/bin/python -m pip install --no-build-isolation --no-index
                           ${data}/python)
step("python imports" COMMAND ${venv}/bin/python -c
     "import mambacheck_adapter, mambacheck_recorder\nprint(mambacheck_adapter.__version__, mambacheck_adapter.__file__, mambacheck_recorder.__file__)")
expect_match("${OUT}" "^${version} ${venv}/lib/[^\n]*/site-packages/mambacheck_adapter/__init__.py ${venv}/lib/[^\n]*/site-packages/mambacheck_recorder.py\n$"
             "installed Python package")
step("fuzz --external through the entry point" COMMAND ${bin} fuzz --level kernel --cases 30
     --seed 5 --max-size 30 --out ${WORK_DIR}/run/external
     --external "${venv}/bin/mambacheck-worker --kernels mambacheck_adapter.reference --device host")
expect_match("${OUT}" "all cases held" "fuzz --external")
