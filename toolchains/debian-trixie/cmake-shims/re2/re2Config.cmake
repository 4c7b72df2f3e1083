# ortdist shim: Debian ships re2 with pkg-config metadata only; ORT asks find_package(re2 CONFIG).
find_package(PkgConfig REQUIRED)
pkg_check_modules(ORTDIST_RE2 REQUIRED IMPORTED_TARGET re2)
if(NOT TARGET re2::re2)
  add_library(re2::re2 INTERFACE IMPORTED)
  target_link_libraries(re2::re2 INTERFACE PkgConfig::ORTDIST_RE2)
endif()
set(re2_VERSION "${ORTDIST_RE2_VERSION}")
set(re2_FOUND TRUE)
