"""The error hierarchy: every failure says what went wrong, where, and how to fix it.

Each class carries the process exit code the CLI returns, so scripts and CI can tell a bad
recipe (fix the file) from a failed compile (read the log) without parsing messages.
"""

from __future__ import annotations


class OrtdistError(Exception):
    """Base class. ``where`` names the file/key/step; ``fix`` tells the user what to do."""

    exit_code = 1

    def __init__(self, message: str, *, where: str | None = None, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.fix = fix

    def __str__(self) -> str:
        parts = [f"{self.where}: {self.message}" if self.where else self.message]
        if self.fix:
            parts.append(f"  how to fix: {self.fix}")
        return "\n".join(parts)


class RecipeError(OrtdistError):
    """The recipe (or a data file it refers to) is invalid."""

    exit_code = 2


class DataError(OrtdistError):
    """A data file shipped with ortdist (EP registry, targets, toolchain) breaks an invariant."""

    exit_code = 3


class SourceError(OrtdistError):
    """The ONNX Runtime source (or a dependency source) could not be fetched or verified."""

    exit_code = 4


class PatchError(OrtdistError):
    """A patch does not apply."""

    exit_code = 5


class ToolchainError(OrtdistError):
    """The sysroot/toolchain could not be created or entered."""

    exit_code = 6


class BuildError(OrtdistError):
    """CMake configure or the compile failed."""

    exit_code = 7


class PackageError(OrtdistError):
    """Wheel assembly, repair or publishing failed."""

    exit_code = 8


class CheckError(OrtdistError):
    """A built artifact failed its post-build check (clean-root import and inference)."""

    exit_code = 9


class PublishError(OrtdistError):
    """Publishing to a package index was refused (not smoke-tested, version taken) or failed."""

    exit_code = 11


class ModelError(OrtdistError):
    """A model (ONNX or ORT format) or an operator config given for a reduced build is invalid."""

    exit_code = 10


class DiskSpaceError(OrtdistError):
    """The disk holding the cache (or dist/) has too little free space, before or during a build."""

    exit_code = 12
