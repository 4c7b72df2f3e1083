# ortdist shim: cudnn-frontend is header-only and its PyPI wheel carries the headers without a CMake
# package; ORT links the target `cudnn_frontend`. ORTDIST_CUDNN_FRONTEND_INCLUDE_DIR comes from the
# toolchain (toolchains/cuda12.toml, toolchains/cuda13.toml).
if(NOT EXISTS "${ORTDIST_CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend.h")
  message(FATAL_ERROR "cudnn_frontend.h not found in '${ORTDIST_CUDNN_FRONTEND_INCLUDE_DIR}'")
endif()
if(NOT TARGET cudnn_frontend)
  add_library(cudnn_frontend INTERFACE IMPORTED)
  target_include_directories(cudnn_frontend INTERFACE "${ORTDIST_CUDNN_FRONTEND_INCLUDE_DIR}")
endif()
set(cudnn_frontend_VERSION "1.7.0")
set(cudnn_frontend_FOUND TRUE)
