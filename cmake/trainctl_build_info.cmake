# What `--version` reports: the versions of the libraries each program was
# compiled against, passed as compile definitions. Included from the top-level
# CMakeLists.txt after the programs' targets exist.
#
# The definitions go on the few sources that print them (the daemons' main.cc,
# client/version_command.cc), never project-wide: a changed definition then
# recompiles three files, not the torch code.

set(TRAINCTL_GRPC_VERSION "${gRPC_VERSION}")
set(TRAINCTL_PROTOBUF_VERSION "${Protobuf_VERSION}")

# TorchConfigVersion.cmake says what find_package(Torch) found; torch's own
# version.h is the same number and is read when the config file has none.
set(TRAINCTL_TORCH_VERSION "${Torch_VERSION}")
if(NOT TRAINCTL_TORCH_VERSION)
  find_file(TRAINCTL_TORCH_VERSION_H torch/version.h
            PATHS ${TORCH_INCLUDE_DIRS} PATH_SUFFIXES torch/csrc/api/include
            NO_DEFAULT_PATH)
  if(TRAINCTL_TORCH_VERSION_H)
    file(STRINGS "${TRAINCTL_TORCH_VERSION_H}" _torch_version_line
         REGEX "^ *\"[0-9]+\\.[0-9]+\\.[0-9]+")
    string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+[^\"]*" TRAINCTL_TORCH_VERSION
           "${_torch_version_line}")
  endif()
endif()
if(NOT TRAINCTL_TORCH_VERSION)
  set(TRAINCTL_TORCH_VERSION "unknown")
endif()

# CUDA and NCCL only exist in a CUDA LibTorch build (TRAINCTL_WITH_CUDA).
# Torch's CMake config finds CUDA (CUDAToolkit in LibTorch 2.x, FindCUDA in
# 1.x) but says nothing about NCCL, so NCCL's version is read from the nccl.h
# this build sees; an empty value prints as "CPU only".
set(TRAINCTL_CUDA_VERSION "")
set(TRAINCTL_NCCL_VERSION "")
if(TRAINCTL_WITH_CUDA)
  if(CUDAToolkit_VERSION)
    set(TRAINCTL_CUDA_VERSION "${CUDAToolkit_VERSION}")
  elseif(CUDA_VERSION)
    set(TRAINCTL_CUDA_VERSION "${CUDA_VERSION}")
  else()
    set(TRAINCTL_CUDA_VERSION "unknown")
  endif()
  find_path(TRAINCTL_NCCL_INCLUDE_DIR nccl.h
            HINTS $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_INCLUDE_DIRS}
                  ${CUDA_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  if(TRAINCTL_NCCL_INCLUDE_DIR)
    file(STRINGS "${TRAINCTL_NCCL_INCLUDE_DIR}/nccl.h" _nccl_lines
         REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
    foreach(_part MAJOR MINOR PATCH)
      string(REGEX REPLACE ".*#define NCCL_${_part} +([0-9]+).*" "\\1"
             _nccl_${_part} "${_nccl_lines}")
    endforeach()
    set(TRAINCTL_NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
  else()
    set(TRAINCTL_NCCL_VERSION "unknown (no nccl.h at build time)")
  endif()
endif()

set(_common_info
    TRAINCTL_GRPC_VERSION="${TRAINCTL_GRPC_VERSION}"
    TRAINCTL_PROTOBUF_VERSION="${TRAINCTL_PROTOBUF_VERSION}")
# trainctl-coordinator and trainctl-worker compile only their main.cc.
target_compile_definitions(trainctl-coordinator PRIVATE ${_common_info})
target_compile_definitions(
  trainctl-worker PRIVATE ${_common_info}
  TRAINCTL_TORCH_VERSION="${TRAINCTL_TORCH_VERSION}"
  TRAINCTL_CUDA_VERSION="${TRAINCTL_CUDA_VERSION}"
  TRAINCTL_NCCL_VERSION="${TRAINCTL_NCCL_VERSION}")
set_source_files_properties(
  client/version_command.cc DIRECTORY client
  PROPERTIES COMPILE_DEFINITIONS "${_common_info}")

message(STATUS "trainctl ${PROJECT_VERSION}: gRPC ${TRAINCTL_GRPC_VERSION}, "
               "Protobuf ${TRAINCTL_PROTOBUF_VERSION}, LibTorch "
               "${TRAINCTL_TORCH_VERSION}, CUDA '${TRAINCTL_CUDA_VERSION}', "
               "NCCL '${TRAINCTL_NCCL_VERSION}'")
