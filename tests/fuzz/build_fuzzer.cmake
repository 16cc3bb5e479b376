# Configures and builds tests/fuzz (the spec fuzzer) with clang++ into its
# own build tree: the `spec_fuzz_build` test, a fixture of `spec_fuzz`.
#   cmake -DSOURCE_DIR=<repo> -DBINARY_DIR=<dir> -DFUZZ_CXX=<clang++> -P ...
cmake_host_system_information(RESULT jobs QUERY NUMBER_OF_LOGICAL_CORES)
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/fuzz -B ${BINARY_DIR}
          -DCMAKE_CXX_COMPILER=${FUZZ_CXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo
  RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the spec fuzzer failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} -j${jobs}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the spec fuzzer failed (${rc})")
endif()
# Inputs the fuzzer finds go here, never into the checked-in seeds.
file(MAKE_DIRECTORY ${BINARY_DIR}/corpus-found)
