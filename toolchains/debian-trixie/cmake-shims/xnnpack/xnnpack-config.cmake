# ortdist shim: Debian ships XNNPACK (libxnnpack-dev) as one shared library with no CMake
# metadata; ORT asks find_package(xnnpack) and links the targets XNNPACK and microkernels-prod
# (upstream's split of the kernels, which Debian's libXNNPACK.so already contains).
find_path(ORTDIST_XNNPACK_INCLUDE_DIR xnnpack.h REQUIRED)
find_library(ORTDIST_XNNPACK_LIBRARY NAMES XNNPACK REQUIRED)
if(NOT TARGET XNNPACK)
  add_library(XNNPACK SHARED IMPORTED GLOBAL)
  set_target_properties(XNNPACK PROPERTIES
    IMPORTED_LOCATION "${ORTDIST_XNNPACK_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ORTDIST_XNNPACK_INCLUDE_DIR}")
endif()
if(NOT TARGET microkernels-prod)
  add_library(microkernels-prod INTERFACE IMPORTED GLOBAL)
endif()
set(xnnpack_FOUND TRUE)
