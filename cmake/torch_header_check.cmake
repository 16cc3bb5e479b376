# Refuses a build whose torch headers come from two LibTorch generations.
#
# The compiler lists every header a probe of the worker's torch includes
# pulls in (-M); each torch, ATen, c10 or caffe2 header must resolve inside
# the LibTorch that find_package(Torch) found. With a 2.x wheel and Debian's
# libtorch-dev both installed, a header the wheel lacks would otherwise come
# silently from 1.13's /usr/include. One exception, said out loud: the wheel
# ships no gloo headers, and ProcessGroupGloo.hpp includes them, so a 2.x
# build takes them from Debian's libgloo-dev. Only gloo's class names reach
# trainctl's code (the device and context are held through shared_ptr, the
# store adapter is built inside libtorch), so its version does not matter.
#
# Runs once per LibTorch (about 10 s of preprocessing), not on every
# reconfigure.

set(_check_key "${TRAINCTL_TORCH_PREFIX};${Torch_VERSION};${TRAINCTL_WITH_CUDA};${TRAINCTL_CXX_STANDARD}")
if(NOT TRAINCTL_TORCH_HEADERS_CHECKED STREQUAL _check_key)
  set(_probe "${CMAKE_BINARY_DIR}/CMakeFiles/torch_header_probe.cc")
  set(_probe_text
      "#include <torch/torch.h>\n#include <torch/script.h>\n"
      "#include <torch/version.h>\n#include <ATen/autocast_mode.h>\n"
      "#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>\n"
      "#include <torch/csrc/distributed/c10d/HashStore.hpp>\n")
  if(TRAINCTL_WITH_CUDA)
    list(APPEND _probe_text
         "#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>\n"
         "#include <ATen/cuda/CUDAEvent.h>\n")
  endif()
  string(CONCAT _probe_text ${_probe_text})
  file(WRITE "${_probe}" "${_probe_text}")
  set(_flags -std=c++${TRAINCTL_CXX_STANDARD} -M)
  foreach(_d IN LISTS TORCH_INCLUDE_DIRS)
    if(NOT _d IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
      list(APPEND _flags -isystem "${_d}")
    endif()
  endforeach()
  foreach(_t torch_cpu torch_cuda)
    if(TARGET ${_t})
      get_target_property(_defs ${_t} INTERFACE_COMPILE_DEFINITIONS)
      foreach(_d IN LISTS _defs)
        list(APPEND _flags "-D${_d}")
      endforeach()
      get_target_property(_incs ${_t} INTERFACE_INCLUDE_DIRECTORIES)
      foreach(_i IN LISTS _incs)
        # The compiler's own folders stay where it puts them (include_next).
        get_filename_component(_i "${_i}" ABSOLUTE)
        if(NOT _i MATCHES "\\$<" AND
           NOT _i IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
          list(APPEND _flags -isystem "${_i}")
        endif()
      endforeach()
    endif()
  endforeach()
  if(TRAINCTL_GLOO_INCLUDE_DIR AND
     NOT TRAINCTL_GLOO_INCLUDE_DIR IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    list(APPEND _flags -isystem "${TRAINCTL_GLOO_INCLUDE_DIR}")
  endif()
  if(TRAINCTL_WITH_CUDA AND CUDAToolkit_INCLUDE_DIRS)
    foreach(_i IN LISTS CUDAToolkit_INCLUDE_DIRS)
      if(NOT _i IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
        list(APPEND _flags -isystem "${_i}")
      endif()
    endforeach()
  endif()
  # The project's own flags too: an -I there goes before every -isystem.
  separate_arguments(_torch_cxx_flags UNIX_COMMAND "${TORCH_CXX_FLAGS} ${CMAKE_CXX_FLAGS}")
  execute_process(
    COMMAND ${CMAKE_CXX_COMPILER} ${_flags} ${_torch_cxx_flags} "${_probe}"
    OUTPUT_VARIABLE _deps ERROR_VARIABLE _err RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "trainctl: the torch headers of LibTorch ${Torch_VERSION} "
                        "in ${TRAINCTL_TORCH_PREFIX} do not compile as "
                        "C++${TRAINCTL_CXX_STANDARD} (LibTorch after about 2.12 "
                        "needs C++20: -DTRAINCTL_CXX_STANDARD=20, untested):\n${_err}")
  endif()
  string(REPLACE "\\\n" " " _deps "${_deps}")
  separate_arguments(_deps UNIX_COMMAND "${_deps}")
  set(_foreign "")
  set(_gloo_from "")
  foreach(_h IN LISTS _deps)
    if(NOT _h MATCHES "\\.(h|hpp|hxx|cuh|inc|def)$" AND NOT _h MATCHES "/include/c\\+\\+/")
      continue()
    endif()
    _trainctl_inside("${_h}" "${TRAINCTL_TORCH_PREFIX}" _in)
    if(_in)
      if(_h MATCHES "/include/google/")
        list(APPEND _foreign "${_h} (the wheel's own protobuf)")
      endif()
    elseif(_h MATCHES "/(torch|ATen|c10|caffe2|THC)/")
      list(APPEND _foreign "${_h}")
    elseif(_h MATCHES "/gloo/" AND TRAINCTL_TORCH_MAJOR GREATER_EQUAL 2)
      string(REGEX REPLACE "/gloo/.*" "/gloo" _gloo_from "${_h}")
    endif()
  endforeach()
  if(_foreign)
    list(REMOVE_DUPLICATES _foreign)
    list(LENGTH _foreign _n)
    list(SUBLIST _foreign 0 5 _shown)
    string(REPLACE ";" "\n  " _shown "${_shown}")
    message(FATAL_ERROR
      "trainctl: LibTorch ${Torch_VERSION} is in ${TRAINCTL_TORCH_PREFIX}, but "
      "${_n} torch header(s) resolve outside it, e.g.\n  ${_shown}\n"
      "These come from another LibTorch (Debian's libtorch-dev puts 1.13's "
      "headers in /usr/include); one build must use one generation's headers. "
      "Remove the other LibTorch's headers from the include path, or build "
      "against it instead.")
  endif()
  if(_gloo_from)
    message(STATUS "trainctl: the wheel ships no gloo headers; "
                   "ProcessGroupGloo.hpp takes them from ${_gloo_from} "
                   "(libgloo-dev); only its class names are used")
  endif()
  set(TRAINCTL_TORCH_HEADERS_CHECKED "${_check_key}" CACHE INTERNAL
      "The LibTorch whose headers passed the generation check")
endif()
