"""Build script for the C frame hook; all metadata lives in pyproject.toml."""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "dynamo_lite._evalframe",
            sources=["dynamo_lite/_evalframe.c"],
            extra_compile_args=["-O2", "-Wall", "-Wno-missing-field-initializers"],
        )
    ]
)
