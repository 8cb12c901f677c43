# What `cmake --install BUILD --prefix PREFIX` lays out:
#   bin/mambacheck
#   share/mambacheck/scenarios/{library,examples,workloads}   the data the binary ships with; it
#                       finds them next to itself (harness/data_dir.h), so a moved or installed
#                       binary needs no source tree
#   share/mambacheck/model/examples/read_case.py               reading a case directory in numpy
#   share/mambacheck/python/                  the Python package (adapter, worker, recorder):
#                       `pip install PREFIX/share/mambacheck/python`
#   include/mambacheck/{model,scenarios}/*.h  headers of the exported libraries
#   lib/libmc_model.a, lib/libmc_scenarios.a  case files and traces for other C++ tools
#   lib/libmc_fmt.a                           fmt's compiled part, which those two call
#   lib/cmake/mambacheck/                     find_package(mambacheck): mambacheck::model,
#                       mambacheck::scenarios, mambacheck::mambacheck (the program)
#   share/doc/mambacheck/                     README, docs/, the file-format specifications
# Only these targets are installed: building `mambacheck` builds all three.
include(CMakePackageConfigHelpers)

set(MC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/mambacheck)

install(TARGETS mambacheck EXPORT mambacheckTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS mc_model mc_scenarios mc_fmt EXPORT mambacheckTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Every header of the two libraries: they include one another by their source-tree paths
# ("model/layout.h"), which include/mambacheck keeps.
foreach(dir model scenarios)
  file(GLOB mc_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.h)
  install(FILES ${mc_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mambacheck/${dir})
endforeach()

install(EXPORT mambacheckTargets NAMESPACE mambacheck:: DESTINATION ${MC_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mambacheckConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/mambacheckConfig.cmake
                              INSTALL_DESTINATION ${MC_INSTALL_CMAKEDIR}
                              PATH_VARS MC_INSTALL_DATADIR)
# 0.x: a minor version may change the formats' C++ API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mambacheckConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mambacheckConfig.cmake
              ${PROJECT_BINARY_DIR}/mambacheckConfigVersion.cmake
        DESTINATION ${MC_INSTALL_CMAKEDIR})

# Data, under the same relative paths as in the source tree (harness/data_dir.h looks them up
# by those paths).
foreach(dir scenarios/library scenarios/examples scenarios/workloads model/examples)
  get_filename_component(mc_parent ${dir} DIRECTORY)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${MC_INSTALL_DATADIR}/${mc_parent})
endforeach()

# The Python package as a source tree pip installs from (pyproject.toml), its tests included;
# what a build of it leaves in the source tree stays out.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/adapters/python/ DESTINATION ${MC_INSTALL_DATADIR}/python
        PATTERN __pycache__ EXCLUDE
        PATTERN *.egg-info EXCLUDE
        PATTERN build EXCLUDE
        PATTERN dist EXCLUDE)

install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/model/CASE_FORMAT.md
              ${PROJECT_SOURCE_DIR}/model/LAUNCH_KINDS.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/scenarios/FORMAT.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
        RENAME TRACE_FORMAT.md)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
