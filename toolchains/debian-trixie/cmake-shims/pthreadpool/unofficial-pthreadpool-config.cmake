# ortdist shim: Debian's libpthreadpool-dev has no CMake metadata. ORT asks
# find_package(unofficial-pthreadpool) and links the target `pthreadpool`.
find_path(ORTDIST_PTHREADPOOL_INCLUDE_DIR pthreadpool.h REQUIRED)
find_library(ORTDIST_PTHREADPOOL_LIBRARY NAMES pthreadpool REQUIRED)
if(NOT TARGET pthreadpool)
  add_library(pthreadpool SHARED IMPORTED GLOBAL)
  set_target_properties(pthreadpool PROPERTIES
    IMPORTED_LOCATION "${ORTDIST_PTHREADPOOL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ORTDIST_PTHREADPOOL_INCLUDE_DIR}")
endif()
if(NOT TARGET unofficial::pthreadpool)
  add_library(unofficial::pthreadpool ALIAS pthreadpool)
endif()
set(unofficial-pthreadpool_FOUND TRUE)
