"""Build of the optional compiled core, ``kafkalog._native`` (everything else is in pyproject.toml).

The extension is optional: without a C compiler or the Python headers the build warns and the
package installs pure-Python. ``KAFKALOG_NO_EXTENSION=1`` skips it on purpose;
``KAFKALOG_SANITIZE=1`` builds it with AddressSanitizer and UBSan (scripts/sanitize.sh).
"""

import glob
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SANITIZE = os.environ.get("KAFKALOG_SANITIZE", "") not in ("", "0")


class OptionalBuildExt(build_ext):
    """build_ext that never fails the install: the pure-Python core is always there."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # no compiler at all (setuptools raises several types)
            self._skip(e)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # a compiler error: install pure-Python rather than not at all
            if SANITIZE:
                raise
            self._skip(e)

    @staticmethod
    def _skip(e: Exception) -> None:
        print(f"kafkalog: the compiled core was not built ({e}); installing the pure-Python core",
              file=sys.stderr)


def _extensions() -> list:
    if os.environ.get("KAFKALOG_NO_EXTENSION", "") not in ("", "0"):
        return []
    compile_args = ["-std=c11", "-O3", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]
    link_args = []
    macros = []
    if SANITIZE:
        flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
        compile_args = [a for a in compile_args if a != "-O3"] + ["-O1", "-g"] + flags
        link_args += flags
        macros.append(("KAFKALOG_SANITIZE", "1"))
    sources = sorted(glob.glob(os.path.join("src", "native", "*.c")))
    return [
        Extension(
            "kafkalog._native",
            sources=sources,
            depends=glob.glob(os.path.join("src", "native", "*.h")),
            include_dirs=[os.path.join("src", "native")],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            define_macros=macros,
        )
    ]


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
