# ortdist shim: Debian's protobuf 3.21 has no CMake package config, only CMake's FindProtobuf module;
# ORT asks find_package(Protobuf CONFIG). Forward to the module, which defines the protobuf:: targets.
find_package(Protobuf MODULE REQUIRED)
set(protobuf_VERSION "${Protobuf_VERSION}")
set(protobuf_FOUND TRUE)
