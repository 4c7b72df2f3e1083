# ortdist shim: ORT declares the dependency as "eigen"; Debian installs Eigen 3.4.0's own config as Eigen3.
find_package(Eigen3 3.4 CONFIG REQUIRED)
set(eigen_VERSION "${Eigen3_VERSION}")
set(eigen_FOUND TRUE)
