# Which LibTorch the worker compiles against, and the checks that keep one
# build from mixing the two generations trainctl supports: Debian's LibTorch
# 1.13 (CPU) and a PyTorch 2.x wheel (CUDA, NCCL).
#
# Debian installs its torch headers straight into /usr/include and its
# libraries into the linker's default path, so a 2.x build that is not
# careful takes from 1.13 any header or library the wheel's CMake config does
# not pin down: it compiles, and fails at run time. This file refuses that.
#
# Sets TRAINCTL_TORCH_MAJOR, TRAINCTL_WITH_CUDA, TRAINCTL_TORCH_PREFIX and
# TRAINCTL_TORCH_PYTHON.

# TorchConfig looks for libtorch and libc10 on the linker's default path
# before its own folder: with Debian's libtorch-dev installed, a wheel build
# would find /usr/lib/.../libtorch.so. Pin them to the config's own LibTorch
# first. (Putting the wheel's folder itself on CMAKE_PREFIX_PATH is no fix:
# it also hands find_package(Protobuf) the wheel's protoc 3.13.)
if(NOT Torch_DIR)
  foreach(_p IN LISTS CMAKE_PREFIX_PATH)
    if(EXISTS "${_p}/Torch/TorchConfig.cmake")
      set(Torch_DIR "${_p}/Torch")
      break()
    endif()
  endforeach()
endif()
if(Torch_DIR AND EXISTS "${Torch_DIR}/TorchConfig.cmake")
  get_filename_component(_config_prefix "${Torch_DIR}/../../.." ABSOLUTE)
  # TorchConfig's find_package(Caffe2) would also take Debian's first.
  if(NOT Caffe2_DIR AND EXISTS "${Torch_DIR}/../Caffe2/Caffe2Config.cmake")
    get_filename_component(Caffe2_DIR "${Torch_DIR}/../Caffe2" ABSOLUTE)
    set(Caffe2_DIR "${Caffe2_DIR}" CACHE PATH "Caffe2's CMake config, beside Torch's")
  endif()
  find_library(TORCH_LIBRARY torch PATHS "${_config_prefix}/lib" NO_DEFAULT_PATH)
  find_library(c10_LIBRARY c10 PATHS "${_config_prefix}/lib" NO_DEFAULT_PATH)
  find_library(C10_CUDA_LIBRARY c10_cuda PATHS "${_config_prefix}/lib" NO_DEFAULT_PATH)
endif()
find_package(Torch REQUIRED)
string(REGEX MATCH "^[0-9]+" TRAINCTL_TORCH_MAJOR "${Torch_VERSION}")
get_filename_component(TRAINCTL_TORCH_PREFIX "${TORCH_INSTALL_PREFIX}" REALPATH)
# The Python whose torch is this LibTorch (tests load what the build writes
# there): a wheel's venv, <venv>/lib/pythonX.Y/site-packages/torch, or
# Debian's /usr/bin/python3 for /usr.
get_filename_component(_venv_python "${TRAINCTL_TORCH_PREFIX}/../../../../bin/python3" ABSOLUTE)
if(NOT TRAINCTL_TORCH_PREFIX STREQUAL "/usr" AND EXISTS "${_venv_python}")
  set(TRAINCTL_TORCH_PYTHON "${_venv_python}")
else()
  set(TRAINCTL_TORCH_PYTHON /usr/bin/python3)
endif()

# _trainctl_inside(path prefix out): whether path (resolved) lies in prefix.
function(_trainctl_inside path prefix out)
  get_filename_component(real "${path}" REALPATH)
  string(FIND "${real}/" "${prefix}/" at)
  if(at EQUAL 0)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

set(_torch_targets torch torch_cpu torch_cuda c10 c10_cuda)

# 1. Libraries and configs: all from the LibTorch the config belongs to.
set(_torch_libs ${TORCH_LIBRARY} ${c10_LIBRARY} ${C10_CUDA_LIBRARY} ${Caffe2_DIR})
foreach(_t IN LISTS _torch_targets)
  if(TARGET ${_t})
    foreach(_p IMPORTED_LOCATION IMPORTED_LOCATION_RELEASE IMPORTED_LOCATION_NOCONFIG)
      get_target_property(_loc ${_t} ${_p})
      if(_loc)
        list(APPEND _torch_libs "${_loc}")
      endif()
    endforeach()
  endif()
endforeach()
list(FILTER _torch_libs EXCLUDE REGEX "NOTFOUND$")
foreach(_lib IN LISTS _torch_libs)
  _trainctl_inside("${_lib}" "${TRAINCTL_TORCH_PREFIX}" _ok)
  if(NOT _ok)
    message(FATAL_ERROR
      "trainctl: LibTorch ${Torch_VERSION} is in ${TRAINCTL_TORCH_PREFIX}, but "
      "its CMake config picked ${_lib} from outside it (Debian's LibTorch "
      "1.13 installs into /usr/lib and is found first). Linking both crashes "
      "at run time. Configure a fresh build folder with "
      "-DTorch_DIR=${TRAINCTL_TORCH_PREFIX}/share/cmake/Torch "
      "(`make build-torch2` does).")
  endif()
endforeach()
# Our messages are compiled by Debian's protoc against its protobuf 3.21; the
# wheel carries its own protoc and headers of 3.13.
foreach(_pb "${Protobuf_INCLUDE_DIR}" "${Protobuf_PROTOC_EXECUTABLE}")
  if(_pb)
    _trainctl_inside("${_pb}" "${TRAINCTL_TORCH_PREFIX}" _in)
    if(_in AND NOT TRAINCTL_TORCH_PREFIX STREQUAL "/usr")
      message(FATAL_ERROR
        "trainctl: protobuf was found inside LibTorch ${Torch_VERSION} "
        "(${_pb}): the wheel's protoc and headers are 3.13, the libprotobuf "
        "trainctl links is the system's. Keep the LibTorch folder itself off "
        "CMAKE_PREFIX_PATH; pass -DTorch_DIR=${TRAINCTL_TORCH_PREFIX}/share/cmake/Torch.")
    endif()
  endif()
endforeach()

# 2. Include folders. The wheel carries the protobuf 3.13 headers it was
# built with under include/google; Debian's protobuf 3.21 compiled our
# messages, and a torch include folder ahead of /usr/include would hand the
# generated code the wrong headers. The worker sees the wheel's include
# folder through a copy of its top level made of links, without google/.
if(TRAINCTL_TORCH_MAJOR GREATER_EQUAL 2 AND
   EXISTS "${TRAINCTL_TORCH_PREFIX}/include/google")
  set(_filtered "${CMAKE_BINARY_DIR}/torch-include")
  file(REMOVE_RECURSE "${_filtered}")
  file(MAKE_DIRECTORY "${_filtered}")
  file(GLOB _entries RELATIVE "${TRAINCTL_TORCH_PREFIX}/include"
       "${TRAINCTL_TORCH_PREFIX}/include/*")
  foreach(_e IN LISTS _entries)
    if(NOT _e STREQUAL "google")
      file(CREATE_LINK "${TRAINCTL_TORCH_PREFIX}/include/${_e}" "${_filtered}/${_e}"
           SYMBOLIC)
    endif()
  endforeach()
  set(TORCH_INCLUDE_DIRS "${_filtered}" "${_filtered}/torch/csrc/api/include")
  foreach(_t IN LISTS _torch_targets)
    if(TARGET ${_t})
      get_target_property(_dirs ${_t} INTERFACE_INCLUDE_DIRECTORIES)
      if(_dirs)
        list(FILTER _dirs EXCLUDE REGEX "^(${TORCH_INSTALL_PREFIX}|${TRAINCTL_TORCH_PREFIX})/include")
        # "/usr/lib/../include" is /usr/include, which -isystem must not
        # move ahead of the C++ library's own (include_next).
        set(_kept "")
        foreach(_d IN LISTS _dirs)
          get_filename_component(_abs "${_d}" ABSOLUTE)
          if(NOT _abs IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
            list(APPEND _kept "${_d}")
          endif()
        endforeach()
        set_target_properties(${_t} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES
                              "${TORCH_INCLUDE_DIRS};${_kept}")
      endif()
    endif()
  endforeach()
endif()

# GPU code paths (CUDA tensors, ProcessGroupNCCL) compile only against a
# LibTorch built with CUDA; Debian's is CPU-only. AUTO follows the LibTorch;
# ON refuses one without CUDA (`make build-cuda`); OFF leaves CUDA out.
set(TRAINCTL_CUDA AUTO CACHE STRING "Build the CUDA/NCCL path: AUTO, ON or OFF")
set(TRAINCTL_WITH_CUDA OFF)
if(TORCH_CUDA_LIBRARIES OR TARGET torch_cuda)
  if(NOT TRAINCTL_CUDA STREQUAL "OFF")
    set(TRAINCTL_WITH_CUDA ON)
  endif()
elseif(TRAINCTL_CUDA STREQUAL "ON")
  message(FATAL_ERROR
    "trainctl: TRAINCTL_CUDA=ON, but LibTorch ${Torch_VERSION} in "
    "${TRAINCTL_TORCH_PREFIX} has no CUDA (Debian's is CPU-only); use a CUDA "
    "wheel: `make build-cuda` (docs/gpu.md)")
endif()

# NCCL: ProcessGroupNCCL.hpp's inline code and its Options' layout follow
# nccl.h's version macros, so the header must be the NCCL torch runs with:
# the wheel's nvidia-nccl package beside it when there is one (the CUDA
# toolkit's may be another release), else NCCL_ROOT or the toolkit's.
if(TRAINCTL_WITH_CUDA)
  get_filename_component(_site_packages "${TRAINCTL_TORCH_PREFIX}/.." ABSOLUTE)
  find_path(TRAINCTL_NCCL_INCLUDE_DIR nccl.h
            HINTS "${_site_packages}/nvidia/nccl/include" $ENV{NCCL_ROOT}/include
                  $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS}
            NO_DEFAULT_PATH)
  if(NOT TRAINCTL_NCCL_INCLUDE_DIR)
    message(FATAL_ERROR
      "trainctl: the CUDA path needs nccl.h, of the NCCL that LibTorch "
      "${Torch_VERSION} was built with; set NCCL_ROOT (the wheel's "
      "nvidia-nccl package has it under site-packages/nvidia/nccl)")
  endif()
  foreach(_dir "${TRAINCTL_NCCL_INCLUDE_DIR}" ${CUDAToolkit_INCLUDE_DIRS})
    if(EXISTS "${_dir}/nccl.h")
      file(STRINGS "${_dir}/nccl.h" _lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
      string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*NCCL_MINOR +([0-9]+).*NCCL_PATCH +([0-9]+).*"
             "\\1.\\2.\\3" _version "${_lines}")
      list(APPEND _nccl_versions "${_dir}: ${_version}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _nccl_versions)
  message(STATUS "trainctl: nccl.h from ${TRAINCTL_NCCL_INCLUDE_DIR} (seen: ${_nccl_versions})")
endif()

# gloo: ProcessGroupGloo.hpp includes gloo's headers, which the wheel does
# not ship (see torch_header_check.cmake for why another copy is safe).
if(NOT EXISTS "${TRAINCTL_TORCH_PREFIX}/include/gloo/algorithm.h")
  find_path(TRAINCTL_GLOO_INCLUDE_DIR gloo/algorithm.h)
  if(NOT TRAINCTL_GLOO_INCLUDE_DIR)
    message(FATAL_ERROR
      "trainctl: LibTorch ${Torch_VERSION} in ${TRAINCTL_TORCH_PREFIX} ships no "
      "gloo headers, which ProcessGroupGloo.hpp includes: install libgloo-dev "
      "(Debian, Ubuntu) or put gloo's include folder on CMAKE_PREFIX_PATH")
  endif()
endif()

include(${CMAKE_CURRENT_LIST_DIR}/torch_header_check.cmake)
message(STATUS "trainctl: LibTorch ${Torch_VERSION} from ${TRAINCTL_TORCH_PREFIX}; "
               "CUDA/NCCL path ${TRAINCTL_WITH_CUDA}")
