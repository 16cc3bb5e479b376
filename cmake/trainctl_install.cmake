# `cmake --install` and `cpack`: the three programs, the systemd units, the
# example job specs and the docs. Included from the top-level CMakeLists.txt
# after the programs' targets exist. See docs/deploy.md.

include(GNUInstallDirs)

# `install` and cpack's preinstall step install what is built instead of
# first building every target (the tests and benchmarks compile LibTorch
# code for many minutes). Build the three programs first:
#   cmake --build build --target trainctl trainctl-coordinator trainctl-worker \
#     trainctl-tokenizer
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

install(TARGETS trainctl trainctl-coordinator trainctl-worker trainctl-tokenizer
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# A worker built against a LibTorch outside the system's folders (a PyTorch
# wheel, a LibTorch archive) finds it there once installed too; torch's own
# libraries find CUDA's and NCCL's through their RUNPATH.
if(NOT TRAINCTL_TORCH_PREFIX STREQUAL "/usr")
  set_target_properties(trainctl-worker PROPERTIES
                        INSTALL_RPATH "${TRAINCTL_TORCH_PREFIX}/lib")
endif()

# The units name their binary by absolute path, which is only known at
# install time: `cmake --install --prefix P` and cpack (which installs with
# prefix /usr into a staging DESTDIR) both change CMAKE_INSTALL_PREFIX after
# configuration. So the units are filled in by the install script itself;
# file(INSTALL) honours DESTDIR and records them in install_manifest.txt.
# lib/systemd/system (not ${CMAKE_INSTALL_LIBDIR}, which is multiarch on
# Debian) is where systemd looks under /usr and /usr/local.
set(TRAINCTL_UNIT_SOURCE_DIR ${PROJECT_SOURCE_DIR}/deploy/systemd)
set(TRAINCTL_UNIT_STAGE_DIR ${PROJECT_BINARY_DIR}/deploy/systemd)
install(CODE "
  set(TRAINCTL_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
  foreach(unit trainctl-coordinator.service trainctl-worker.service
               trainctl-worker-join.service)
    configure_file(\"${TRAINCTL_UNIT_SOURCE_DIR}/\${unit}\"
                   \"${TRAINCTL_UNIT_STAGE_DIR}/\${unit}\" @ONLY)
    file(INSTALL \"${TRAINCTL_UNIT_STAGE_DIR}/\${unit}\"
         DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\"
         FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  endforeach()
")

set(TRAINCTL_EXAMPLES_DIR ${CMAKE_INSTALL_DATADIR}/trainctl/examples)
install(FILES examples/fashion-mnist-mlp.yaml examples/fashion-mnist-cnn.yaml
              examples/fashion-mnist-cnn-augmented.yaml
              examples/fortunes-gpt.yaml examples/fortunes-gpt-subwords.yaml
              examples/make_fortune_topics.sh examples/export_torchscript.py
              examples/export_hf_classifier.py
              examples/trainctl_models.py
              deploy/systemd/trainctl-coordinator.env
              deploy/systemd/trainctl-worker.env
              deploy/slurm/trainctl-workers.sbatch
        DESTINATION ${TRAINCTL_EXAMPLES_DIR})
install(FILES README.md docs/architecture.md docs/cli.md docs/deploy.md
              docs/job-spec.md docs/performance.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- cpack: one .deb, depending on the Debian 12 runtime packages --------
# Only with Debian's LibTorch: a worker linked against a pip wheel depends on
# a venv no package provides.
if(NOT TRAINCTL_TORCH_PREFIX STREQUAL "/usr")
  message(STATUS "trainctl: LibTorch from ${TRAINCTL_TORCH_PREFIX}: no .deb "
                 "(cpack) for this build; the Debian package needs Debian's")
  return()
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME trainctl)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "trainctl maintainers <trainctl@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "gRPC-coordinated distributed training with LibTorch")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "trainctl-coordinator queues training jobs and gang-assigns their "
       "ranks to trainctl-worker node agents, which train with LibTorch and "
       "all-reduce through c10d. trainctl is the command-line client.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The packages of the shared libraries the three programs link directly
# (readelf NEEDED, mapped with dpkg -S; libtorch1.13 brings Gloo and BLAS
# itself); tests/deploy/deb_test.sh fails when a linked library's package is
# missing here. The minimum versions are Debian 12's.
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libc6 (>= 2.36), libstdc++6 (>= 12), libgcc-s1 (>= 12),
     libgrpc++1.51 (>= 1.51.1), libgrpc29 (>= 1.51.1),
     libprotobuf32 (>= 3.21.12), libabsl20220623 (>= 20220623.1),
     libyaml-cpp0.7 (>= 0.7.0), libsqlite3-0 (>= 3.40.1), zlib1g (>= 1:1.2.13),
     libssl3 (>= 3.0.9), libjpeg62-turbo (>= 1:2.1.5), libpng16-16 (>= 1.6.39),
     libsndfile1 (>= 1.2.0), libsentencepiece0 (>= 0.1.97),
     libcairo2 (>= 1.16.0), fonts-dejavu-core, libcurl4 (>= 7.88.1),
     libtorch1.13 (>= 1.13.1)")
string(REGEX REPLACE "[\n ]+" " " CPACK_DEBIAN_PACKAGE_DEPENDS
       "${CPACK_DEBIAN_PACKAGE_DEPENDS}")
# Debian's LibTorch runs with whatever libblas.so.3 is installed; the
# reference BLAS is 5-8x slower than OpenBLAS here (see install-deps.sh).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libopenblas0-pthread")
# daemon-reload after install and removal so systemd sees the units; the
# units are not enabled: a worker needs its coordinator's address first.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
    ${PROJECT_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Builds for a package strip their debug info (the worker shrinks several
# fold); `cmake --install` keeps it.
set(CPACK_STRIP_FILES ON)
include(CPack)
