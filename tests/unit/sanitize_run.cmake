# The `sanitize` test (label sanitize): the coordinator and CLI unit tests
# built with AddressSanitizer and UndefinedBehaviorSanitizer in a build tree
# of their own, then run. No torch code is compiled (TRAINCTL_WITH_WORKER=OFF).
#   cmake -DSOURCE_DIR=<repo> -DBINARY_DIR=<dir> -DCXX=<compiler> -P ...
# The tree is kept between runs, and ccache (if the project finds it) serves
# the compiles, so a rerun rebuilds only what changed.
cmake_host_system_information(RESULT jobs QUERY NUMBER_OF_LOGICAL_CORES)
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR}
          # -O0: about half the compile time of -O2, and this build is
          # compiled from scratch wherever ccache is cold (a fresh CI
          # machine); -g1 keeps file:line in the sanitizer reports.
          -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1"
          -DCMAKE_CXX_COMPILER=${CXX}
          -DTRAINCTL_WITH_WORKER=OFF -DTRAINCTL_SANITIZE=address,undefined
  OUTPUT_QUIET RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the sanitizer build failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} -j${jobs}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the sanitizer build failed (${rc})")
endif()
execute_process(
  COMMAND ${CMAKE_CTEST_COMMAND} --test-dir ${BINARY_DIR} -L unit
          --output-on-failure -j${jobs}
  RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "unit tests under ASan/UBSan failed (${rc}); see the "
          "sanitizer reports above")
endif()
