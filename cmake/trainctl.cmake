# Shared helpers for the trainctl build.

set(TRAINCTL_WARNINGS -Wall -Wextra -Wno-unused-parameter)

# trainctl_add_test(NAME <name> LABEL unit|integration SOURCES ... LIBS ...
#                   [TIMEOUT seconds])
function(trainctl_add_test)
  cmake_parse_arguments(T "" "NAME;LABEL;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  # A test on the torch libraries reuses their precompiled torch/torch.h:
  # each of its files parses in a few seconds instead of about 30 where
  # ccache is cold (a fresh CI machine), twice over with the 2.x flavour.
  get_property(torch_libraries GLOBAL PROPERTY TRAINCTL_TORCH_LIBRARIES)
  foreach(lib IN LISTS T_LIBS)
    if(lib IN_LIST torch_libraries)
      target_precompile_headers(${T_NAME} REUSE_FROM trainctl_torch)
      break()
    endif()
  endforeach()
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main
                                          GTest::gmock)
  target_compile_options(${T_NAME} PRIVATE ${TRAINCTL_WARNINGS})
  target_compile_definitions(
    ${T_NAME} PRIVATE TRAINCTL_BIN_DIR="${CMAKE_BINARY_DIR}/bin"
                      TRAINCTL_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  # Tests run as root in CI containers; their workers may run root ranks
  # (a worker refuses that unless told; hostile_users_test checks it).
  set_tests_properties(${T_NAME} PROPERTIES LABELS ${T_LABEL} TIMEOUT ${T_TIMEOUT}
                       ENVIRONMENT TRAINCTL_ALLOW_ROOT_RANKS=1)
endfunction()
