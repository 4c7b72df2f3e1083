"""Post-build checks that run the artifact outside the build environment."""
