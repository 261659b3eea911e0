"""One build step pyproject.toml cannot express: the registry file users read and edit lives at
the top of the repository (models.toml) and ships inside the package (abricot_local/models.toml
in the wheel). An editable install reads it where it is (registry.packaged_file)."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    def _registry_target(self) -> str:
        return str(Path(self.build_lib) / "abricot_local" / "models.toml")

    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):  # editable: read from the source tree
            self.mkpath(str(Path(self._registry_target()).parent))
            self.copy_file("models.toml", self._registry_target())

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        extra = [] if getattr(self, "editable_mode", False) else [self._registry_target()]
        return [*super().get_outputs(include_bytecode), *extra]


setup(cmdclass={"build_py": BuildPy})
