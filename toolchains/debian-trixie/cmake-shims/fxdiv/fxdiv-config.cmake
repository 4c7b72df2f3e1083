# ortdist shim: fxdiv is one header (libfxdiv-dev); pthreadpool's build wants a target for it.
find_path(ORTDIST_FXDIV_INCLUDE_DIR fxdiv.h REQUIRED)
if(NOT TARGET fxdiv)
  add_library(fxdiv INTERFACE IMPORTED GLOBAL)
  set_target_properties(fxdiv PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${ORTDIST_FXDIV_INCLUDE_DIR}")
endif()
set(fxdiv_FOUND TRUE)
