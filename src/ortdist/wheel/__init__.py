"""Python wheels: assemble with scikit-build-core, repair with the target's tool, record the build."""
