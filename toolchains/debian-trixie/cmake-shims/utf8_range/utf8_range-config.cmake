# ortdist shim: protobuf 3.21 carries utf8_range inside libprotobuf; nothing separate to link.
if(NOT TARGET utf8_range::utf8_range)
  add_library(utf8_range::utf8_range INTERFACE IMPORTED)
endif()
if(NOT TARGET utf8_range::utf8_validity)
  add_library(utf8_range::utf8_validity INTERFACE IMPORTED)
endif()
set(utf8_range_FOUND TRUE)
